"""jetbench.run"""
