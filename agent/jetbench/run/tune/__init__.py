"""`jetbench tune` (study.py runs one; request, space, storage, choice and output are its
parts)."""
