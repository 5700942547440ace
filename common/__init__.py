"""What every layer shares, at the bottom of the imports (it imports nothing of the
project): `common.setting`, the config field with its rules beside it that the
model's, the data's and the trainer's sections are made of, and `common.signals`,
SIGTERM and SIGHUP turned into an exception so that cleanup code runs.

The network (model/) reads `common.setting` alone: ``import model.gpt`` loads
model/'s files and that one module (tests/model/test_standalone.py counts them).
"""
