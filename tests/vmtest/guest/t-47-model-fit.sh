# vmtest-checks: 3
# vmtest-kernels: 6.1
# vmtest-drive: throttling.iops-total=3000,throttling.bps-total=41943040
# vmtest-beside: yes
# `tune --model`'s convergence in `make test`, at one device point: m-47's
# run from a model 4x too optimistic, whose fit must determine all six
# terms, each within 15 % of the device's caps (QEMU's throttle: the model
# the device is; `profile` measured it within 1 %, which m-47 still does),
# as must the model in force (m-47-model.sh has the method, the
# pessimistic start, the run from iocost off and the other device points,
# measured by hand).
# 3000 requests/s and 40 MiB/s: the caps' crossover (13 KiB) is nearest
# 4 KiB of the three points, so the emulated device is nearest a linear
# one; there the fit's worst term came within 3.5-6.1 % of the profile in
# the runs recorded on 2026-11-26/27 (at 2000/s and 64 MiB/s wbps lands
# 14-15 % above it: QEMU's max(1/iops, bytes/bps), docs/validation/tune-model.md). The fit
# against the best linear models of its windows is printed, not asserted
# here: at this point the caps' one came within 3.6-9.2 % of the fit and
# the measured one (stalls included) 2.2-13.1 %, too near the 10 % bound
# for a check that must not fail by chance; m-47 asserts it. One kernel
# line: the fit is the loader's logic, and its ~2.5 minutes are CI's budget.
M47_QUICK=1 . "$(dirname "$0")/m-47-model.sh"
