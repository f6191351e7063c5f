# vmtest-checks: 4
# The guest is what later tests rely on.
. "$(dirname "$0")/lib.sh"
ok "pure cgroup v2 with the io controller" "grep -qw io $CG/cgroup.controllers && ! grep -q ' cgroup ' /proc/mounts"
ok "nvme0n1 with one hardware queue per vCPU (4 queue pairs offered)" "[ \$(ls /sys/block/$DEV/mq | wc -l) -eq \$(nproc) ]"
for d in /sys/block/$DEV/mq/*; do echo "  hctx $(basename $d): cpus $(cat $d/cpu_list)"; done
ok "kernel and nvme BTF" "[ -r /sys/kernel/btf/vmlinux ] && [ -r /sys/kernel/btf/nvme_core ]"
ok "iocost and nvme tracepoints" "[ -d /sys/kernel/tracing/events/iocost ] && [ -d /sys/kernel/tracing/events/nvme ]"
