# vmtest-checks: 4
# vmtest-beside: yes
# The guest is what later tests rely on.
. "$(dirname "$0")/lib.sh"
ok "pure cgroup v2 with the io controller" "grep -qw io $CG/cgroup.controllers && ! grep -q ' cgroup ' /proc/mounts"
ok "nvme0n1 with one hardware queue per vCPU (4 queue pairs offered)" "[ \$(ls /sys/block/$DEV/mq | wc -l) -eq \$(nproc) ]"
for d in /sys/block/$DEV/mq/*; do echo "  hctx $(basename $d): cpus $(cat $d/cpu_list)"; done
# 5.10 has no module BTF (CONFIG_DEBUG_INFO_BTF_MODULES came in 5.11): there
# t-31 checks that iowarden says so instead of t-30 checking the nvme probe.
if [ "${VMTEST_KERNEL_LINE:-}" = 5.10 ]; then
  ok "kernel BTF, and no module BTF (5.10)" "[ -r /sys/kernel/btf/vmlinux ] && [ ! -e /sys/kernel/btf/nvme_core ]"
else
  ok "kernel and nvme BTF" "[ -r /sys/kernel/btf/vmlinux ] && [ -r /sys/kernel/btf/nvme_core ]"
fi
ok "iocost and nvme tracepoints" "[ -d /sys/kernel/tracing/events/iocost ] && [ -d /sys/kernel/tracing/events/nvme ]"
