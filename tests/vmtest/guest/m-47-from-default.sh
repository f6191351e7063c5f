# vmtest-checks: 8
# vmtest-drive: throttling.iops-total=2000,throttling.bps-total=67108864
# m-47-from-off.sh's run, the tuner starting from a configured but wrong
# QoS instead: iocost on with the kernel's own QoS and model, which a
# protected reader's SLO misses beside a hog (t-45's (b)). M47=m-47-from-default
# make vmtest-model runs it at every published point.
M47_OFF=1 M47_FROM=default . "$(dirname "$0")/m-47-model.sh"
