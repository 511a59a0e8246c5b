"""jetbench.ownership"""
