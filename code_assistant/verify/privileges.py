"""Every capability taken from the test command before it executes: under Landlock, what bubblewrap's `--cap-drop
ALL` does. Run as root (CI, a devcontainer, most Docker images) a confined command would otherwise keep root's
capabilities, and with them ways around any ruleset: setns into PID 1's namespaces, device nodes of the disk,
netlink on the host's interfaces, kernel modules, another user's files.

`drop` empties the effective, permitted, inheritable and ambient sets. With CAP_SETPCAP (as root) it first empties
the bounding set and locks the securebits, so that uid 0 gains nothing at exec (NOROOT), a change of uid restores
nothing (NO_SETUID_FIXUP) and nothing is raised again (KEEP_CAPS and ambient raises locked off); without it (a normal
user) there is nothing to drop from those. PR_SET_NO_NEW_PRIVS, set by the caller before, keeps setuid programs and
file capabilities from giving anything back at exec.

The calls to make and the reading of /proc/self/status are pure; standard library only: it runs first in every
confined test process.
"""
from __future__ import annotations

import ctypes
import errno
import os
import struct
from pathlib import Path

__all__ = ["SECUREBITS", "capability_sets", "drop", "drop_plan"]

# linux/prctl.h, linux/securebits.h, linux/capability.h
PR_CAPBSET_DROP, PR_GET_SECUREBITS, PR_SET_SECUREBITS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 27, 28, 47, 4
NOROOT, NOROOT_LOCKED, NO_SETUID_FIXUP, NO_SETUID_FIXUP_LOCKED = 1 << 0, 1 << 1, 1 << 2, 1 << 3
KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, NO_CAP_AMBIENT_RAISE_LOCKED = 1 << 5, 1 << 6, 1 << 7
SECUREBITS = (NOROOT | NOROOT_LOCKED | NO_SETUID_FIXUP | NO_SETUID_FIXUP_LOCKED | KEEP_CAPS_LOCKED
              | NO_CAP_AMBIENT_RAISE | NO_CAP_AMBIENT_RAISE_LOCKED)
CAP_SETPCAP = 8
_CAPABILITY_VERSION_3 = 0x20080522
STATUS, LAST_CAP = Path("/proc/self/status"), Path("/proc/sys/kernel/cap_last_cap")
_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def capability_sets(status: str) -> dict[str, int]:
    """The capability sets of a /proc/PID/status text, by the kernel's names (CapEff...)."""
    sets = {}
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in _SETS:
            sets[name] = int(value.strip(), 16)
    return sets


def drop_plan(last_cap: int, effective: int) -> list[tuple[int, int]]:
    """The prctl calls (option, argument), in order, before the sets are emptied: the ambient set cleared; with
    CAP_SETPCAP in `effective`, every capability up to `last_cap` out of the bounding set and the securebits locked
    (both need CAP_SETPCAP, still effective until the sets are emptied)."""
    calls = [(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)]
    if effective & (1 << CAP_SETPCAP):
        calls += [(PR_CAPBSET_DROP, cap) for cap in range(last_cap + 1)]
        calls.append((PR_SET_SECUREBITS, SECUREBITS))
    return calls


def _status() -> dict[str, int]:
    sets = capability_sets(STATUS.read_text(encoding="ascii", errors="replace"))
    if set(sets) != set(_SETS):
        raise OSError(errno.EINVAL, f"no capability sets in {STATUS}")
    return sets


def drop() -> None:
    """Take every capability from this process and what it executes; raises OSError when any is left."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.restype = ctypes.c_int
    before = _status()
    for option, argument in drop_plan(int(LAST_CAP.read_text(encoding="ascii")), before["CapEff"]):
        if libc.prctl(ctypes.c_int(option), ctypes.c_ulong(argument), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"prctl({option}, {argument}): {os.strerror(code)}")
    header = ctypes.create_string_buffer(struct.pack("=Ii", _CAPABILITY_VERSION_3, 0), 8)
    empty = ctypes.create_string_buffer(bytes(24), 24)  # two __user_cap_data_struct: effective, permitted, inheritable
    if libc.capset(header, empty) < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")
    after = _status()
    left = {name: value for name, value in after.items()
            if value and (name != "CapBnd" or before["CapEff"] & (1 << CAP_SETPCAP))}
    if left:
        raise OSError(errno.EPERM, f"capabilities left: {', '.join(f'{n} {v:x}' for n, v in sorted(left.items()))}")
