"""Atomic outputs: temporary files owned by a live process, and a final move that never
replaces a file it was not told to replace.

- :func:`owned_temps`: a context manager yielding a temp-file prefix in the output folder
  (``.xdem-tmp-<pid>-<hex>-``). The prefix's ``owner.lock`` file is ``flock``-ed for as long as
  the writer lives; every file with the prefix is removed when the block exits, on any error,
  ``KeyboardInterrupt`` or signal (the CLI turns SIGINT and SIGTERM into
  :class:`xdem.interrupt.Interrupted`; what a failure removed is noted for its one line).
- :func:`remove_stale_temps`: removes the temps of writers that died without cleaning up
  (SIGKILL, power loss): their ``owner.lock`` is no longer locked. A temp set whose owner
  lock can still not be taken belongs to a live process and is never touched. Called by every
  :func:`owned_temps`, so a later write in the same folder cleans up.
- :func:`move_into_place`: the final move. With ``overwrite`` it is :func:`os.replace`.
  Without, it is ``os.link(tmp, path)`` then ``os.unlink(tmp)``: ``link`` fails with
  ``FileExistsError`` atomically if ``path`` appeared meanwhile (another run writing the same
  output), so the other file is never replaced. Where hard links are not supported (some
  FUSE/SMB mounts), Linux's ``renameat2(RENAME_NOREPLACE)`` is used through ctypes; where that
  is missing too, a last check then :func:`os.rename` (not atomic; documented).
- :func:`write_text_atomic`: text files (JSON, HTML reports) written the same way.
- :func:`output_journal`: records every file :func:`move_into_place` puts in place inside the
  block; if the block fails, those files are removed again (only if they are still the files
  this process wrote) and a file replaced with ``overwrite`` is restored from a hard-link
  backup. The CLI runs every command in one journal: an exit 1 leaves nothing new behind.
  Outputs to object storage are *deferred* (:class:`Deferred`, see :mod:`xdem.io.upload`):
  staged locally, published as late as possible (:func:`publish_deferred`, or when the
  outermost journal ends well) and deleted again if the run fails after publishing them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from xdem import interrupt
from xdem.errors import OutputError

__all__ = ["check_output_path",
           "TEMP_PREFIX", "owned_temps", "remove_stale_temps", "move_into_place", "default_file_mode",
           "write_text_atomic", "output_journal", "defer", "publish_deferred", "staged_file",
           "OutputJournal", "Deferred"]

#: Prefix of every temporary file xdem writes next to an output.
TEMP_PREFIX = ".xdem-tmp-"
_OWNER = "owner.lock"
#: A temp set without an owner lock (written by an older xdem) is removed only if its pid is
#: dead and its newest file is older than this (seconds).
_ORPHAN_AGE_S = 3600.0


def _flock(fd: int, *, block: bool) -> bool | None:
    """``flock(LOCK_EX)`` on ``fd``: True if taken, False if another process holds it
    (non-blocking), None where locks are not available (Windows, some network filesystems)."""
    try:
        import fcntl  # POSIX only
    except ImportError:  # pragma: no cover - Windows
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError:  # ENOLCK, EOPNOTSUPP: no locks on this filesystem
        return None
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_set(folder: Path, prefix: str) -> list[Path]:
    """Remove every file of one temp set, the owner lock last; returns the files removed."""
    owner = folder / (prefix + _OWNER)
    removed = []
    for leftover in folder.glob(prefix + "*"):
        if leftover != owner:
            with contextlib.suppress(OSError):
                if leftover.is_dir() and not leftover.is_symlink():  # a staging folder (xdem.io.upload)
                    shutil.rmtree(leftover)
                else:
                    leftover.unlink()
                removed.append(leftover)
    with contextlib.suppress(OSError):
        owner.unlink()
    return removed


def remove_stale_temps(folder: str | os.PathLike) -> list[str]:
    """Remove the temporary files in ``folder`` left by xdem writers that are dead.

    A temp set ``.xdem-tmp-<pid>-<hex>-*`` is stale when its ``owner.lock`` can be locked (its
    owner, which held the lock for its lifetime, is gone: locks die with their process, even
    on SIGKILL). Sets without an owner lock, and every set where locks are not available
    (Windows, network filesystems without ``flock``), are removed only when their pid is not
    running on this machine and nothing in them changed for an hour. Returns the prefixes removed.
    """
    folder = Path(folder)
    removed: list[str] = []
    try:
        names = [p.name for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX)]
    except OSError:
        return removed
    prefixes: dict[str, int] = {}
    for name in names:
        parts = name[len(TEMP_PREFIX):].split("-", 2)
        if len(parts) == 3 and parts[0].isdigit() and len(parts[1]) == 32:
            prefixes.setdefault(f"{TEMP_PREFIX}{parts[0]}-{parts[1]}-", int(parts[0]))
    for prefix, pid in prefixes.items():
        owner = folder / (prefix + _OWNER)
        try:
            fd = os.open(owner, os.O_RDWR)
        except FileNotFoundError:
            if _orphan(folder, prefix, pid):
                _remove_set(folder, prefix)
                removed.append(prefix)
            continue
        except OSError:
            continue
        try:
            free = _flock(fd, block=False)
            if free or (free is None and _orphan(folder, prefix, pid)):  # lock free: the owner is dead
                _remove_set(folder, prefix)
                removed.append(prefix)
        finally:
            os.close(fd)
    return removed


def _orphan(folder: Path, prefix: str, pid: int) -> bool:
    """No lock to ask: stale if the pid is not running here and nothing changed for an hour."""
    try:
        newest = max(f.stat().st_mtime for f in folder.glob(prefix + "*"))
    except (OSError, ValueError):
        return False
    return not _pid_alive(pid) and time.time() - newest > _ORPHAN_AGE_S


@contextlib.contextmanager
def owned_temps(folder: str | os.PathLike) -> Iterator[str]:
    """Yield a temp prefix (``folder/.xdem-tmp-<pid>-<hex>-``) owned by this process.

    Stale temps of dead writers in ``folder`` are removed first. The prefix's owner lock is
    created under another name, locked, then renamed into place, so that no other process
    can ever see it unlocked while this one lives. Every file with the prefix is removed when
    the block exits, whatever the reason.
    """
    folder = Path(folder)
    remove_stale_temps(folder)
    prefix = f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}-"
    pending = folder / f".xdem-lock-{uuid.uuid4().hex}"
    with interrupt.deferred():  # a signal in between would leave the lock file: it is raised below
        fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _flock(fd, block=True)
            os.rename(pending, folder / (prefix + _OWNER))
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                pending.unlink()
            raise
    try:
        interrupt.checkpoint()
        yield str(folder / prefix)
    except BaseException:  # an error or a signal: the run's one line says what was removed
        for path in _remove_set(folder, prefix):
            if not path.name.endswith(".lock"):
                interrupt.note_removed(path, temporary=True)
        raise
    else:
        _remove_set(folder, prefix)
    finally:
        os.close(fd)


def _renameat2_noreplace(src: str, dst: str) -> None:
    """Linux ``renameat2(src, dst, RENAME_NOREPLACE)``; ``OSError`` if unavailable."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    func = getattr(libc, "renameat2", None)
    if func is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    at_fdcwd, rename_noreplace = -100, 1
    if func(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), rename_noreplace) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), dst)


def _exists_error(path: Path) -> OutputError:
    return OutputError(
        f"'{path}' was created by another process while this run was writing it; it was left untouched and "
        "this run's result discarded; choose another path, or pass --overwrite (overwrite=True) to replace it"
    )


class Deferred(Protocol):
    """An output published at the end of the run (an upload to object storage, staged locally)."""

    url: str
    local: str

    def publish(self) -> None:
        """Put the output in place (one conditional upload)."""

    def undo(self) -> None:
        """Remove the published output again, if it is still the one this run wrote."""

    def discard(self) -> None:
        """Remove the local staging (after :meth:`publish`, or instead of it)."""


class OutputJournal:
    """The files put in place by :func:`move_into_place` while the journal is active, and the
    deferred outputs (:class:`Deferred`) waiting for publication or published."""

    def __init__(self) -> None:
        self.moved: list[tuple[Path, tuple[int, int], Path | None]] = []  # path, (dev, ino), backup
        self.deferred: list[Deferred] = []
        self.published: list[Deferred] = []

    def publish(self) -> None:
        """Publish the deferred outputs, in order (each one's staging removed once it is published)."""
        while self.deferred:
            item = self.deferred[0]
            item.publish()
            self.deferred.pop(0)
            self.published.append(item)
            item.discard()

    def backup(self, path: Path) -> Path | None:
        """Hard link to the existing ``path`` before it is replaced (``None`` if impossible)."""
        if not path.exists():
            return None
        backup = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}-backup-{path.name}")
        try:
            os.link(path, backup)
        except OSError:
            return None
        return backup

    def record(self, path: Path, backup: Path | None) -> None:
        st = os.stat(path)
        self.moved.append((path, (st.st_dev, st.st_ino), backup))

    def commit(self) -> None:
        """Keep the new files and published objects; drop the backups."""
        self.published.clear()
        for _, _, backup in self.moved:
            if backup is not None:
                with contextlib.suppress(OSError):
                    backup.unlink()
        self.moved.clear()

    def rollback(self) -> None:
        """Remove the objects published and the files written (if still ours), restore the
        replaced files, and drop the staging of the deferred outputs."""
        for item in reversed(self.published):
            with contextlib.suppress(Exception):  # the clean-up goes on (the run's line says what failed)
                item.undo()
        for item in self.deferred:
            item.discard()
        self.published.clear()
        self.deferred.clear()
        for path, ident, backup in reversed(self.moved):
            try:
                st = os.stat(path)
                ours = (st.st_dev, st.st_ino) == ident
            except OSError:
                ours = False
            if ours:
                with contextlib.suppress(OSError):
                    if backup is not None:
                        os.replace(backup, path)
                        backup = None
                        interrupt.note_restored(path)
                    else:
                        path.unlink()
                        interrupt.note_removed(path)
            if backup is not None:
                with contextlib.suppress(OSError):
                    backup.unlink()
        self.moved.clear()


_JOURNALS: list[OutputJournal] = []


@contextlib.contextmanager
def output_journal() -> Iterator[OutputJournal]:
    """Undo, if the block raises (anything, including ``KeyboardInterrupt``), every output that
    :func:`move_into_place` put in place inside it.

    A file written without ``overwrite`` is removed; one written with ``overwrite`` over an
    existing file is replaced by the previous file again (kept as a hard link until the block
    ends; where hard links are not supported the previous file cannot be restored and the new
    one is removed). A file is only touched if it is still the one this process wrote.
    Journals nest: an inner journal that succeeds hands its files to the enclosing one, so a
    later failure of the outer block undoes them too.
    """
    journal = OutputJournal()
    parent = _JOURNALS[-1] if _JOURNALS else None
    _JOURNALS.append(journal)

    def keep() -> None:  # inside another journal, that one decides (a later failure undoes these too)
        if parent is not None:
            parent.moved.extend(journal.moved)
            parent.deferred.extend(journal.deferred)
            parent.published.extend(journal.published)
            journal.moved.clear()
            journal.deferred.clear()
            journal.published.clear()
            return
        try:
            journal.publish()  # the outermost journal: the deferred outputs last of all
        except BaseException:
            journal.rollback()
            raise
        journal.commit()

    try:
        yield journal
    except BaseException as exc:
        # a successful exit raised as an exception (sys.exit(0), click's Exit(0)) keeps the outputs
        code = exc.code if isinstance(exc, SystemExit) else getattr(exc, "exit_code", 1)
        if code in (0, None):
            keep()
        else:
            journal.rollback()
        raise
    else:
        keep()
    finally:
        _JOURNALS.remove(journal)


def defer(item: Deferred) -> None:
    """Publish ``item`` when the run's outputs are final (:func:`publish_deferred`, or the end of
    the outermost :func:`output_journal`); a failure before removes its staging, one after
    removes it from its store (:meth:`Deferred.undo`). Outside a journal it is published now."""
    if not _JOURNALS:
        try:
            item.publish()
        finally:
            item.discard()
        return
    _JOURNALS[-1].deferred.append(item)


def publish_deferred() -> None:
    """Publish the deferred outputs of the innermost journal now (the CLI calls it as the last
    step of a command, where a signal still interrupts the upload); a later failure of the
    journal removes them again."""
    if _JOURNALS:
        _JOURNALS[-1].publish()


def staged_file(url: str | os.PathLike) -> str | None:
    """The local staging of the deferred output ``url`` (to read it back before it is
    published: the statistics and report of a run), or ``None``."""
    text = os.fspath(url)
    for journal in reversed(_JOURNALS):
        for item in journal.deferred:
            if item.url == text:
                return item.local
    return None


def default_file_mode() -> int:
    """The mode ``open()`` gives a new file: ``0o666`` less the process umask (``0o644`` with
    the usual umask 022). Outputs get it whatever temp file they were written through.

    Examples
    --------
    >>> oct(default_file_mode() & 0o600)
    '0o600'
    """
    umask = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                umask = int(line.split()[1], 8)
    if umask is None:  # not Linux: read it by setting it (and put it back at once)
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


def move_into_place(tmp: str | os.PathLike, path: str | os.PathLike, *, overwrite: bool) -> None:
    """Move the finished ``tmp`` onto ``path`` (same folder), atomically.

    With ``overwrite`` an existing ``path`` is replaced. Without, an existing ``path`` (even one
    that appeared after the checks) is never replaced: :class:`~xdem.errors.OutputError`.
    ``tmp`` is left in place on error (the caller's temp clean-up removes it). Inside
    :func:`output_journal`, the move is recorded so that a later failure undoes it.
    """
    tmp, path = os.fspath(tmp), Path(path)
    with contextlib.suppress(OSError):  # temp files (mkstemp) are 0600: give the output a plain file's mode
        os.chmod(tmp, default_file_mode())
    journal = _JOURNALS[-1] if _JOURNALS else None
    with interrupt.deferred():  # a signal between the move and its record would leave the output
        backup = journal.backup(path) if journal is not None and overwrite else None
        try:
            _move(tmp, path, overwrite=overwrite)
        except BaseException:
            if backup is not None:
                with contextlib.suppress(OSError):
                    backup.unlink()
            raise
        if journal is not None:
            journal.record(path, backup)
    interrupt.checkpoint()


def _move(tmp: str, path: Path, *, overwrite: bool) -> None:
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise _exists_error(path) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS, errno.EMLINK):
            raise
        try:
            _renameat2_noreplace(tmp, os.fspath(path))
        except FileExistsError:
            raise _exists_error(path) from None
        except OSError as exc2:
            if exc2.errno not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            if path.exists():  # last resort, not atomic: no link and no renameat2 here
                raise _exists_error(path) from None
            os.rename(tmp, path)
        return
    os.unlink(tmp)


def write_text_atomic(path: str | os.PathLike, text: str, *, overwrite: bool) -> Path:
    """Write ``text`` to a temp file next to ``path`` and move it into place
    (:func:`move_into_place`). Raises :class:`~xdem.errors.OutputError` naming ``path``."""
    path = Path(path)
    tmp = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}-{path.name}")
    try:
        tmp.write_text(text)
        move_into_place(tmp, path, overwrite=overwrite)
    except (OutputError, KeyboardInterrupt):  # KeyboardInterrupt: Ctrl-C or a signal (xdem.interrupt)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OutputError(f"cannot write '{path}' ({exc}); check the folder exists, is writable and has free space") from exc
    return path


def check_output_path(
    path: str | os.PathLike,
    *,
    overwrite: bool,
    inputs: Iterable[tuple[str, str | os.PathLike]] = (),
    what: str = "output",
    overwrite_hint: str = "overwrite=True",
) -> Path:
    """The one guard of every output xdem writes (COGs, JSON documents, reports): returns the
    absolute path, or raises :class:`~xdem.errors.OutputError` with one line saying how to fix it.

    Refused: a folder that does not exist, is not a folder or is not writable; a path that is
    a folder; a path that is one of ``inputs`` (``(label, path)`` pairs, the label saying what
    the path is, e.g. "the same file as the reference": the same file, even
    through links, never replaced, whatever ``overwrite``); an existing file without
    ``overwrite``. Checking early only saves time: the final move
    (:func:`move_into_place`) refuses an existing file again, atomically.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> check_output_path(os.path.join(folder, "out.tif"), overwrite=False).name
    'out.tif'
    """
    p = Path(os.path.abspath(os.fspath(path)))
    folder = p.parent
    if not folder.exists():
        raise OutputError(f"the folder of {what} '{p}' does not exist; create it first (mkdir -p '{folder}')")
    if not folder.is_dir():
        raise OutputError(f"'{folder}' is not a folder, so {what} '{p.name}' cannot be written in it; choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"the folder of {what} '{folder}' is not writable; choose another folder or fix its permissions")
    resolved = p.resolve()
    for label, src in inputs:
        s = Path(os.path.abspath(os.fspath(src)))
        same = s == p or s.resolve() == resolved
        if not same and s.exists() and p.exists():
            with contextlib.suppress(OSError):
                same = os.path.samefile(s, p)
        if same:
            raise OutputError(f"{what} '{p}' is {label}; write to another path "
                              "(an input is never replaced, even with overwrite)")
    if p.is_dir():
        raise OutputError(f"{what} '{p}' is a folder; give a file path")
    if p.exists() and not overwrite:
        raise OutputError(f"{what} '{p}' already exists; pass {overwrite_hint} to replace it or choose another path")
    return p
