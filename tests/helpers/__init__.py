"""Helpers the tests share (fixtures stay in conftest.py): one home, nothing imported from
another test file."""
