#!/usr/bin/env python3
"""Loads and attaches every program of a BPF object (libbpf through ctypes)
and holds them until SIGTERM or SIGINT: the floor for `make bench`."""
import ctypes, os, signal, sys

lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
lib.bpf_object__open_file.restype = ctypes.c_void_p
lib.bpf_object__open_file.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
lib.bpf_object__load.argtypes = [ctypes.c_void_p]
lib.bpf_object__next_program.restype = ctypes.c_void_p
lib.bpf_object__next_program.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.bpf_program__attach.restype = ctypes.c_void_p
lib.bpf_program__attach.argtypes = [ctypes.c_void_p]
lib.bpf_program__name.restype = ctypes.c_char_p
lib.bpf_program__name.argtypes = [ctypes.c_void_p]

def fail(what):
    sys.exit(f"floor: {what}: {os.strerror(ctypes.get_errno())}")

obj = lib.bpf_object__open_file(sys.argv[1].encode(), None)
if not obj:
    fail(f"opening {sys.argv[1]}")
if lib.bpf_object__load(obj):
    fail("loading")
links, prog = [], lib.bpf_object__next_program(obj, None)
while prog:
    link = lib.bpf_program__attach(prog)
    if not link:
        fail(f"attaching {lib.bpf_program__name(prog).decode()}")
    links.append(link)
    prog = lib.bpf_object__next_program(obj, prog)
print(f"floor: attached {len(links)} programs", flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
signal.pause()
