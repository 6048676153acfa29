"""Memory and CPU of one process from /proc, sampled while a phase runs.

VmHWM is the kernel's own peak resident set (it includes shared buffers the
process touched); RssAnon is its private memory, sampled here, so its peak
is what the process itself allocated.  CPU is utime + stime from
/proc/PID/stat, in seconds."""

import os
import threading

TICKS = os.sysconf("SC_CLK_TCK")


def status_kb(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # after the command: state is field 3, utime 14, stime 15 (1-based)
    return (int(fields[11]) + int(fields[12])) / TICKS


class Sampler:
    """Samples one pid every `interval` seconds until stop()."""

    def __init__(self, pid, interval=0.05):
        self.pid = pid
        self.interval = interval
        self.peak_anon_kb = 0
        self.cpu_start = cpu_seconds(pid)
        self.cpu_end = self.cpu_start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self):
        anon = status_kb(self.pid, "RssAnon")
        if anon is not None and anon > self.peak_anon_kb:
            self.peak_anon_kb = anon
        cpu = cpu_seconds(self.pid)
        if cpu is not None:
            self.cpu_end = cpu

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sample()
        hwm = status_kb(self.pid, "VmHWM")
        cpu = None if self.cpu_start is None else self.cpu_end - self.cpu_start
        return {"peak_rss_anon_mb": self.peak_anon_kb / 1024, "vm_hwm_mb": (hwm or 0) / 1024, "cpu_s": cpu}
