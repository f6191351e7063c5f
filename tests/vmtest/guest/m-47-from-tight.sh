# vmtest-checks: 8
# vmtest-drive: throttling.iops-total=2000,throttling.bps-total=67108864
# m-47-from-off.sh's run, the tuner starting from a configured but wrong
# QoS instead: the tightest fixed QoS (vrate 20 % on the reference model),
# which meets the SLO and gives up the throughput the tuner must win back.
# M47=m-47-from-tight make vmtest-model runs it at every published point.
M47_OFF=1 M47_FROM=tight . "$(dirname "$0")/m-47-model.sh"
