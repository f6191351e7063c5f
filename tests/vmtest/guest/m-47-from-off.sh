# vmtest-checks: 8
# vmtest-drive: throttling.iops-total=2000,throttling.bps-total=67108864
# m-47's run from iocost off alone (part 3): `tune --model` without --start
# beside a hog, its SLO from the tightest fixed QoS on the device's caps
# (QEMU's throttle, the model the device is), about 4 minutes a device
# point instead of m-47's 15-20. tests/vmtest/model-points.sh runs it at
# every published point (make vmtest-model).
M47_OFF=1 . "$(dirname "$0")/m-47-model.sh"
