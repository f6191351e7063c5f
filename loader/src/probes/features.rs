//! What the running kernel's BPF can do, probed rather than inferred from
//! its version (distributions backport BPF features, and the reverse):
//! compare-and-swap, fexit on a kernel function, and the argument shapes
//! of the block tracepoints.

use libbpf_rs::btf::types::{Enum, Func, FuncProto, Ptr, Struct, Typedef};
use libbpf_rs::btf::{Btf, ReferencesType};
use libbpf_rs::libbpf_sys;

/// Whether BPF programs may use compare-and-swap (BPF_ATOMIC | BPF_CMPXCHG,
/// Linux 5.12): loads a five-instruction program that does one on its
/// stack. IOWARDEN_NO_BPF_CAS makes it answer no, so that tests exercise
/// the fallback on a kernel that has it.
pub fn bpf_has_cmpxchg() -> bool {
    if std::env::var_os("IOWARDEN_NO_BPF_CAS").is_some() {
        return false;
    }
    // *(u64 *)(r10 - 8) = 0; r0 = 0; r1 = 1;
    // r0 = cmpxchg_64(r10 - 8, r0, r1); r0 = 0; exit
    let insns = [
        insn(0x7a, 10, 0, -8, 0),
        insn(0xb7, 0, 0, 0, 0),
        insn(0xb7, 1, 0, 0, 1),
        insn(0xdb, 10, 1, -8, 0xf1),
        insn(0xb7, 0, 0, 0, 0),
        insn(0x95, 0, 0, 0, 0),
    ];
    let opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        ..Default::default()
    };
    let loaded = load(libbpf_sys::BPF_PROG_TYPE_SOCKET_FILTER, &insns, opts);
    // SAFETY: the descriptor is ours to close.
    loaded.map(|fd| unsafe { libc::close(fd) }).is_ok()
}

/// Loads a probe program: its descriptor, or the errno the kernel refused
/// it with.
fn load(
    ty: libbpf_sys::bpf_prog_type,
    insns: &[libbpf_sys::bpf_insn],
    mut opts: libbpf_sys::bpf_prog_load_opts,
) -> Result<i32, i32> {
    // SAFETY: the instructions and options outlive the call, the names are
    // NUL-terminated literals.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            ty,
            c"iow_probe".as_ptr(),
            c"GPL".as_ptr(),
            insns.as_ptr(),
            insns.len() as _,
            &mut opts,
        )
    };
    if fd < 0 {
        return Err(-fd);
    }
    Ok(fd)
}

/// Whether a fexit program can be loaded and attached to kernel function
/// `func` here: Err(errno) when the kernel refuses (EPERM where a security
/// policy forbids tracing programs, ENOENT without the function in BTF).
/// Loads and attaches a two-instruction program for a moment.
pub fn fexit_attaches(btf: &Btf<'_>, func: &str) -> Result<(), i32> {
    let id = btf
        .type_by_name::<Func<'_>>(func)
        .ok_or(libc::ENOENT)?
        .type_id();
    let insns = [insn(0xb7, 0, 0, 0, 0), insn(0x95, 0, 0, 0, 0)]; // r0 = 0; exit
    let opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        expected_attach_type: libbpf_sys::BPF_TRACE_FEXIT,
        attach_btf_id: id.into(),
        ..Default::default()
    };
    let fd = load(libbpf_sys::BPF_PROG_TYPE_TRACING, &insns, opts)?;
    // SAFETY: a program descriptor of ours; NULL attaches a tracing program
    // to its target. Both descriptors are ours to close.
    unsafe {
        let link = libbpf_sys::bpf_raw_tracepoint_open(std::ptr::null(), fd);
        libc::close(fd);
        if link < 0 {
            return Err(-link);
        }
        libc::close(link);
    }
    Ok(())
}

/// Why the kernel refused fexit on `func`, as a status says it (without
/// std's " (os error N)": a status is no error).
pub fn fexit_refusal(func: &str, errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    format!("the kernel refuses fexit on {func}: {text}, errno {errno}")
}

/// Whether struct `name` of the kernel's BTF has a member `member`.
pub fn struct_has_member(btf: &Btf<'_>, name: &str, member: &str) -> bool {
    btf.type_by_name::<Struct<'_>>(name)
        .is_some_and(|s| s.iter().any(|m| m.name.is_some_and(|n| n == member)))
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> libbpf_sys::bpf_insn {
    libbpf_sys::bpf_insn {
        code,
        _bitfield_align_1: [],
        _bitfield_1: libbpf_sys::bpf_insn::new_bitfield_1(dst, src),
        off,
        imm,
    }
}

/// Number of arguments tracepoint `tp` passes to a BPF program (its
/// btf_trace_ typedef's parameters less the leading `void *`); None when
/// the kernel's BTF lacks it.
pub fn tracepoint_arg_count(btf: &Btf<'_>, tp: &str) -> Option<usize> {
    let td = btf.type_by_name::<Typedef<'_>>(&format!("btf_trace_{tp}"))?;
    let ptr = Ptr::try_from(td.referenced_type()).ok()?;
    let proto = FuncProto::try_from(ptr.referenced_type()).ok()?;
    Some(proto.len().saturating_sub(1))
}

/// Whether this kernel checks CAP_BPF on every bpf() call, map reads by
/// fd included: before 6.5 it does while kernel.unprivileged_bpf_disabled
/// is set (Debian's default), from 6.5 only when creating maps and loading
/// programs. Probed in a thread of its own that drops its effective
/// capabilities (they are per thread) and reads a map that cannot exist:
/// EPERM says the check comes first, EBADF that it does not.
pub fn bpf_calls_need_capability() -> bool {
    std::thread::spawn(|| {
        if caps::clear(None, caps::CapSet::Effective).is_err() {
            return true;
        }
        let mut key = 0u32;
        let mut value = 0u64;
        // SAFETY: key and value are valid for the call; fd -1 is refused
        // by the kernel before anything is read or written.
        let rc = unsafe {
            libbpf_sys::bpf_map_lookup_elem(
                -1,
                (&mut key as *mut u32).cast(),
                (&mut value as *mut u64).cast(),
            )
        };
        rc == -libc::EPERM
    })
    .join()
    .unwrap_or(true)
}

/// Value of an enumerator in the running kernel's BTF, searching every enum
/// (QUEUE_FLAG_* live in an anonymous one).
pub(crate) fn kernel_enum_value(btf: &Btf<'_>, name: &str) -> Option<i64> {
    btf.type_by_kind::<Enum<'_>>().find_map(|e| {
        e.iter()
            .find(|m| m.name.is_some_and(|n| n == name))
            .map(|m| m.value)
    })
}
