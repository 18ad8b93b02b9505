"""Landlock with a seccomp filter: the test sandbox where bubblewrap cannot make its namespaces (a container without
unprivileged user namespaces, a hardened kernel), as Codex does on Linux.

The test command is started through this module's `main` (landlock_argv builds the command line): the process
applies a Landlock ruleset and a seccomp filter to itself, then executes the command, which inherits both and can
never drop them. Landlock only allows, beneath the paths it names:
- reads and execution everywhere but the hidden places (HOME, $XDG_RUNTIME_DIR, /tmp), given back for what the
  policy keeps (toolchains, git's configuration, what the user shows);
- writes in the working tree, the caches and a private TMPDIR; a protected path inside one (the tree's `.git`) is
  carved out by allowing the tree's other entries instead, so the tree's top level takes no new entries;
- of /dev only what bubblewrap's --dev shows (null, zero, random, a terminal...): no raw disk or swap device, which
  root owns and would read without any capability;
- no TCP bind or connect (ABI 4 and later), no abstract unix socket or signal outside the sandbox (ABI 6), no
  process outside traced (every ABI); /proc shows no other process (so no other /proc/PID/environ, with its keys).
Landlock also refuses every mount, unmount and remount to the confined process. Last, every capability is dropped
(privileges.py): a command run as root cannot setns into another process's namespaces, make device nodes or use
root's other powers around the ruleset.
Landlock cannot tell loopback from another host, so with the network off the seccomp filter refuses every IPv4, IPv6
and packet socket (UDP and DNS included), loopback too. It also refuses io_uring, which would go around it.

The launcher is this file loaded by its path into an isolated Python (`python -I -S`, landlock_argv): no tree on
sys.path (-I: neither the script's folder nor the working directory, no PYTHONPATH, PYTHONSTARTUP or user site), no
site module (-S: no .pth file, sitecustomize or usercustomize runs), so nothing a repository holds or a plan writes (a
`json.py`, a `ctypes/` in the tree) is imported before the ruleset applies: only the standard library, this file and
privileges.py (by its own path).

Rules are added without following links (O_NOFOLLOW, and the path the descriptor names must be the one planned):
a link in the tree (`.rootfs -> /`) gets no rule, so it never widens one beyond the tree; reading through it is
checked against the rules of where it leads. Only the rules for paths a test cannot write (the system's own, HOME's
toolchains) follow links.

Nothing a test starts outlives the command, `setsid` daemons and double forks included: Landlock has no PID
namespace of its own (where bubblewrap's pid 1 takes every process with it), and making one needs the user namespaces
whose absence is why Landlock stands in; a cgroup needs a delegated hierarchy most machines do not give. So the
launcher forks a supervisor that is a child subreaper (PR_SET_CHILD_SUBREAPER): every process of the run that loses
its parent becomes the supervisor's child, and when the command ends (or the runner, or the assistant, dies) the
supervisor kills its children until none is left. The supervisor stays outside the ruleset, in a process group of
its own: a confined process cannot signal or trace it (Landlock's scopes, ABI 6), and the runner's kill of the
launcher's group reaches it only through its parent-death signal, which starts the sweep.

Pure parts (rule planning, the filter's program) are separate from the syscalls, and the module imports only the
standard library: it runs first in every confined test process.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import signal
import stat
import struct
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MIN_ABI", "Rules", "abi_version", "landlock_argv", "main", "plan", "seccomp_program"]

MIN_ABI = 2  # ABI 1 refuses every rename or link across directories (no REFER right): too many test suites break

# linux/landlock.h
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the only rights a rule on a file may carry
READ = EXECUTE | READ_FILE | READ_DIR
# The devices a test uses, read and written: bubblewrap's --dev set. No other device can be opened (a test run as
# root would read /dev/sda or a swap device: root owns them, no capability is needed).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts",
           "/dev/shm")
DEV, PROC = Path("/dev"), Path("/proc")
_PROC_SELF = ("self", "thread-self")
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # what makes the supervisor end the run early


def handled_fs(abi: int) -> int:
    """Every filesystem right this ABI knows: all of them are handled, so what is not allowed is denied."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


@dataclass(frozen=True)
class Rules:
    """What a confined test run may do (sandbox.Policy in Landlock's terms)."""

    writable: tuple[Path, ...]
    protected: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()  # read-only, also inside a hidden place
    hidden: tuple[Path, ...] = ()  # not readable
    private_tmp: Path | None = None
    network: bool = False

    def to_json(self) -> str:
        return json.dumps({"writable": [str(p) for p in self.writable], "protected": [str(p) for p in self.protected],
                           "readable": [str(p) for p in self.readable], "hidden": [str(p) for p in self.hidden],
                           "private_tmp": str(self.private_tmp) if self.private_tmp else None,
                           "network": self.network})

    @classmethod
    def from_json(cls, text: str) -> Rules:
        data = json.loads(text)
        return cls(writable=tuple(map(Path, data["writable"])), protected=tuple(map(Path, data["protected"])),
                   readable=tuple(map(Path, data["readable"])), hidden=tuple(map(Path, data["hidden"])),
                   private_tmp=Path(data["private_tmp"]) if data["private_tmp"] else None, network=data["network"])


def _inside(path: Path, parent: Path) -> bool:
    return path != parent and path.is_relative_to(parent)


def _entries(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def beneath_except(root: Path, holes: Sequence[Path],
                   entries: Callable[[Path], list[Path]] = _entries) -> list[Path]:
    """Paths whose hierarchies together cover `root` but for the holes: root itself when no hole is inside it, else
    its entries, recursively where a hole lies deeper. An entry that is a link gets no rule: what it leads to is
    checked against that place's own rules, which the walk gives wherever it lies; a rule through the link would
    cover its target's whole hierarchy, holes and all (`/home -> var/home` where HOME is /var/home/alice)."""
    if not any(hole == root or _inside(hole, root) for hole in holes):
        return [root]
    if root in holes:
        return []
    covered: list[Path] = []
    for entry in entries(root):
        if not entry.is_symlink():
            covered += beneath_except(entry, holes, entries)
    return covered


def plan(rules: Rules, abi: int, entries: Callable[[Path], list[Path]] = _entries) -> list[tuple[Path, int]]:
    """The (path, allowed rights) rules of the ruleset, in order."""
    everything = handled_fs(abi)
    planned = [(path, READ | (IOCTL_DEV if abi >= 5 else 0))
               for path in beneath_except(Path("/"), [*rules.hidden, PROC, DEV], entries)]
    planned += [(path, READ) for path in _proc_shown(entries)]
    planned += [(path, READ) for path in rules.readable]
    planned += [(DEV, READ_DIR), *((Path(device), everything) for device in DEVICES)]
    for path in [*rules.writable, *([rules.private_tmp] if rules.private_tmp else [])]:
        holes = [p for p in rules.protected if p == path or _inside(p, path)]
        if not holes:
            planned.append((path, everything))
            continue
        planned.append((path, READ))
        planned += [(part, everything) for part in beneath_except(path, holes, entries)]
    return planned


def _proc_shown(entries: Callable[[Path], list[Path]]) -> list[Path]:
    """/proc but for other processes' directories: a process outside (the assistant, the user's shell) keeps its
    environment, with its keys, to itself. Landlock lets a sandboxed process read another's /proc/PID/environ (it
    only refuses to attach), so those directories get no rule; /proc/self is resolved here, in the process that
    becomes the test command, so the command sees its own (its children do not see theirs)."""
    shown = [entry for entry in entries(PROC) if not entry.name.isdigit() and entry.name not in _PROC_SELF]
    return [*shown, *(PROC / name for name in _PROC_SELF)]


def landlock_argv(python: str, rules: Rules, argv: Sequence[str]) -> list[str]:
    """The command line that confines itself by `rules`, then executes argv: this file loaded by its path (its
    compiled copy reused) into an isolated Python with no site module, so that nothing in the working directory or
    the environment is imported before the ruleset."""
    return [python, "-I", "-S", "-c", _BOOT, str(Path(__file__).resolve()), rules.to_json(), "--", *argv]


_BOOT = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('landlock', sys.argv[1]); "
         "launcher = sys.modules['landlock'] = importlib.util.module_from_spec(spec); "
         "spec.loader.exec_module(launcher); launcher.main(sys.argv[2:])")


# ----- the filter's program ---------------------------------------------------------------------------------------
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SOCKET = {"x86_64": 41, "aarch64": 198}
_IO_URING_SETUP = 425
_X32_BIT = 0x40000000
_AF_INET, _AF_INET6, _AF_PACKET = 2, 10, 17
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


def seccomp_program(machine: str, network: bool) -> list[tuple[int, int, int, int]]:
    """The classic-BPF program (code, jt, jf, k): another architecture's calls (i386's socketcall on x86_64),
    x32 calls and io_uring are refused; without the network, so are IPv4, IPv6 and packet sockets."""
    arch, socket_nr = _AUDIT_ARCH[machine], _SOCKET[machine]
    deny = _RET_ERRNO | errno.EACCES
    program = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, arch), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
               (_LD_W_ABS, 0, 0, 0)]
    if machine == "x86_64":
        program += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    program += [(_JEQ_K, 0, 1, _IO_URING_SETUP), (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    if not network:
        program += [(_JEQ_K, 0, 5, socket_nr), (_LD_W_ABS, 0, 0, 16),  # args[0], the address family
                    (_JEQ_K, 2, 0, _AF_INET), (_JEQ_K, 1, 0, _AF_INET6), (_JEQ_K, 0, 1, _AF_PACKET),
                    (_RET_K, 0, 0, deny)]
    return [*program, (_RET_K, 0, 0, _RET_ALLOW)]


# ----- the syscalls -----------------------------------------------------------------------------------------------
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int | None:
    """The kernel's Landlock ABI (None: no Landlock here, or it is disabled)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(_RULESET_VERSION))
    return int(version) if version > 0 else None


class ConfineError(OSError):
    pass


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise ConfineError(code, f"{what}: {os.strerror(code)}")
    return result


def confine(rules: Rules) -> None:
    """Apply the ruleset and the filter to this process (and everything it will start), then drop every
    capability. Irreversible."""
    privileges = _privileges()  # loaded now: this file may lie where the ruleset hides (HOME, /tmp), as may Python's
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    abi = abi_version()
    if abi is None or abi < MIN_ABI:
        raise ConfineError(errno.ENOSYS, f"Landlock ABI {abi} cannot confine the tests (needs {MIN_ABI})")
    attr = struct.pack("=Q", handled_fs(abi))
    if abi >= 4:
        attr += struct.pack("=Q", NET_BIND_TCP | NET_CONNECT_TCP if not rules.network else 0)
    if abi >= 6:
        attr += struct.pack("=Q", SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _check(libc.syscall(ctypes.c_long(_CREATE_RULESET), buffer, ctypes.c_size_t(len(attr)),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")
    places = writable_places(rules)
    try:
        for path, rights in plan(rules, abi):
            _add_path(libc, ruleset, path, rights, follows_links(path, places))
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)
    _filter(libc, rules.network)
    privileges.drop()


def _privileges() -> types.ModuleType:
    """privileges.py: imported as part of the package, or by its path when this file runs as the launcher (-S:
    there is no package on sys.path, and none is put there)."""
    if __package__:
        from code_assistant.verify import privileges
        return privileges
    import importlib.util
    spec = importlib.util.spec_from_file_location("privileges", Path(__file__).with_name("privileges.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def writable_places(rules: Rules) -> tuple[Path, ...]:
    """Where a test may write (so may have made a link since the rules were planned)."""
    return (*rules.writable, *([rules.private_tmp] if rules.private_tmp else []))


def follows_links(path: Path, places: Sequence[Path]) -> bool:
    """Whether the rule for `path` may follow links: not at or under a place a test may write (the tree, a cache, the
    private TMPDIR), where a link may have been planted; elsewhere (the system's /bin -> usr/bin, a toolchain in
    HOME) nothing a test can change."""
    return not any(path == place or _inside(path, place) for place in places)


def open_rule_path(path: Path, follow: bool = False) -> int | None:
    """An O_PATH descriptor of exactly `path`, not following a link on the way or at its end (None: it is gone, it
    is a link, or a link on the way leads elsewhere); `follow`: of where its links lead."""
    if follow:
        try:
            return os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return None
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None  # gone, or never there: nothing to allow
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode) or os.readlink(f"/proc/self/fd/{fd}") != str(path):
            os.close(fd)
            return None
    except OSError:
        os.close(fd)
        return None
    return fd


def _add_path(libc: ctypes.CDLL, ruleset: int, path: Path, rights: int, follow: bool) -> None:
    fd = open_rule_path(path, follow)
    if fd is None:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)  # packed path_beneath_attr
        _check(libc.syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), attr,
                            ctypes.c_uint32(0)), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _filter(libc: ctypes.CDLL, network: bool) -> None:
    machine = platform.machine()
    if machine not in _AUDIT_ARCH:
        if not network:
            raise ConfineError(errno.ENOSYS, f"no seccomp filter for {machine}: the network cannot be taken away")
        return
    program = seccomp_program(machine, network)
    filters = (_SockFilter * len(program))(*(_SockFilter(*instruction) for instruction in program))
    prog = _SockFprog(len(program), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "prctl(PR_SET_SECCOMP)")


def main(args: Iterable[str]) -> None:
    """RULES_JSON -- COMMAND...: run the command confined, under a supervisor that ends every process it leaves
    (exit 126/127 as a shell would; a command killed by a signal, the same signal)."""
    args = list(args)
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: landlock RULES_JSON -- COMMAND [ARG...]\n")
        raise SystemExit(2)
    try:
        rules = Rules.from_json(args[0])
    except (ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"code-assistant sandbox: bad rules: {exc}\n")
        raise SystemExit(2) from None
    libc = _libc()
    libc.prctl.restype = ctypes.c_int
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the runner's thread gone: this process too
    launcher = os.getpid()
    supervisor = os.fork()
    if supervisor == 0:
        _supervise(libc, rules, args[2:], launcher)
    _exit_as(os.waitpid(supervisor, 0)[1])


class _Supervisor:
    """The supervisor's state: the command's pid once started, and whether it was told to end the run (SIGTERM,
    SIGHUP, SIGINT, its parent's death)."""

    child: int | None = None
    ending: bool = False

    @classmethod
    def end(cls, signum: int = signal.SIGTERM, frame: object = None) -> None:
        """Told to end: every child killed now, so that the wait for the command returns; the sweep follows."""
        cls.ending = True
        for pid in children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _supervise(libc: ctypes.CDLL, rules: Rules, command: list[str], launcher: int) -> None:
    """The supervisor: a subreaper in a process group of its own; starts the confined command, waits for it, then
    kills every process left (adopted orphans, setsid daemons, their children as they are adopted in turn)."""
    for signum in _ENDING:
        signal.signal(signum, _Supervisor.end)
    os.setpgid(0, 0)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if os.getppid() != launcher:  # the launcher died before the death signal was set
        _Supervisor.end()
    status = int(signal.SIGKILL)  # a wait status: killed, when told to end before the command ended
    if not _Supervisor.ending:
        _Supervisor.child = os.fork()
        if _Supervisor.child == 0:
            _become(rules, command)
        if _Supervisor.ending:  # told between the check and the fork
            os.kill(_Supervisor.child, signal.SIGKILL)
        while True:
            try:
                pid, waited = os.waitpid(-1, 0)  # an adopted orphan's end is reaped here as well
            except ChildProcessError:
                break
            if pid == _Supervisor.child:
                status = waited
                break
    end_descendants()
    _exit_as(status)


def _become(rules: Rules, command: list[str]) -> None:
    """In the command's process: confine it, then execute the command (never returns)."""
    code = 126
    try:
        for signum in (*_ENDING, signal.SIGPIPE, signal.SIGXFSZ):  # as a shell leaves them (Python ignores two)
            signal.signal(signum, signal.SIG_DFL)
        try:
            confine(rules)
        except OSError as exc:  # ConfineError, or a capability left
            _say(f"code-assistant sandbox: cannot confine the test command: {exc}")
        else:
            try:
                os.execvp(command[0], command)
            except OSError as exc:
                _say(f"{command[0]}: {exc.strerror}")
                code = 127 if exc.errno == errno.ENOENT else 126
    finally:
        os._exit(code)


def _say(line: str) -> None:
    """A line on stderr that needs no codec import (the ruleset may hide the standard library's other codecs)."""
    os.write(2, (line + "\n").encode("utf-8", "replace"))


def children(pid: int | str = "self") -> list[int]:
    """This process's children (/proc/PID/task/*/children), adopted ones included."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as listed:
                found += [int(word) for word in listed.read().split()]
        except OSError:
            continue
    return found


def end_descendants() -> None:
    """Kill this subreaper's children until it has none: a killed child's own children are adopted, then killed in
    turn. Each pid is a child not yet reaped, so it names no other process."""
    while True:
        for pid in children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _exit_as(status: int) -> None:
    """End this process as the waited one ended: its exit code, or the same signal."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught: nothing to restore
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


if __name__ == "__main__":  # python -I -S landlock.py RULES -- COMMAND: the launcher, as landlock_argv starts it
    main(sys.argv[1:])
