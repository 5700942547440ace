"""What only the command lines need: the flags that name a checkpoint, and the stop
strings of sample.py. The entry points (train.py, sample.py, explore_attention.py,
plot_losses.py) stay thin and call into the packages."""
