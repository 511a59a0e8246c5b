"""Network definitions (plain torch.nn, no torchvision, no downloads).

Every module here imports torch at module level: import them only from code that already
needs torch (the registry imports them lazily, by name).
"""
