#!/usr/bin/python3
"""
A vLLM worker (VLLM::Worker_TP<n>) for the end-to-end suite, in Python as vLLM's are, named with
setproctitle as vLLM names them. setproctitle writes the title over the memory the environment
was placed in at exec, so /proc/PID/environ no longer shows the INVOCATION_ID systemd gave it:
gpugate must tell a leftover worker by its start time. It applies vLLM's start check free >=
utilization x total to its GPU's memory as its engine read it through gpugate's library the
moment it started the worker, exits with a ValueError when short, and otherwise claims its memory
from the driver stand-in and loads for LOAD ms. It talks to its engine by lines: it writes
"checked", "loading", "loaded" and reads "load"; the end of its input is its engine gone. The
orphan worker ignores SIGTERM and its engine's death for ORPHAN ms.
Usage: fake-vllm-worker.py TP MEMORY_JSON (plan in $E2E_VLLM_PLAN).
"""
import json
import math
import os
import signal
import sys
import threading
import time

from setproctitle import setproctitle

tp = int(sys.argv[1])
memory = json.loads(sys.argv[2])
setproctitle(f'VLLM::Worker_TP{tp}')
with open(os.environ['E2E_VLLM_PLAN'], encoding='utf8') as file:
    plan = json.load(file)
orphan = tp == plan['orphanTp']
leaving = threading.Event()


def event(name, **extra):
    with open(plan['events'], 'a', encoding='utf8') as file:
        file.write(json.dumps({'t': int(time.time() * 1000), 'tag': plan['tag'], 'event': name, 'pid': os.getpid(), **extra}) + '\n')


def tell(message):
    try:
        print(message, flush=True)
    except BrokenPipeError:
        leave()


def leave(*_):
    if leaving.is_set():
        return
    leaving.set()
    # The orphan outlives its engine and ignores SIGTERM for a while, as in the incident.
    threading.Timer(plan['orphanIgnoreMs'] / 1000 if orphan else 0, lambda: os._exit(0)).start()


def start_ticks():
    with open(f'/proc/{os.getpid()}/stat', encoding='utf8') as file:
        stat = file.read()
    return stat[stat.rindex(')') + 2:].split(' ')[19]


signal.signal(signal.SIGTERM, leave)
wanted = math.ceil(memory['totalBytes'] * plan['utilization'])
if memory['freeBytes'] < wanted:
    gib = lambda n: f'{n / 1024 ** 3:.2f}'
    sys.stderr.write(f"ValueError: Free memory on device cuda:{tp} ({gib(memory['freeBytes'])}/{gib(memory['totalBytes'])} GiB) on startup is less than desired GPU memory utilization ({plan['utilization']}, {gib(wanted)} GiB).\n")
    event('valueerror', tp=tp, freeBytes=memory['freeBytes'])
    sys.exit(1)
tell('checked')
for line in sys.stdin:
    if line.strip() != 'load':
        continue
    claim = os.path.join(plan['claims'], f'{os.getpid()}.json')
    with open(f'{claim}.tmp', 'w', encoding='utf8') as file:
        json.dump({'pid': os.getpid(), 'startTicks': start_ticks(), 'gpu': tp, 'bytes': plan['bytesPerGpu'], 'name': f'VLLM::Worker_TP{tp}'}, file)
    os.rename(f'{claim}.tmp', claim)
    tell('loading')
    # After a crash the engine is gone: an orphan keeps its memory instead of failing to report.
    threading.Timer(plan['loadMs'] / 1000, lambda: leaving.is_set() or tell('loaded')).start()
# The engine is gone.
leave()
while True:
    time.sleep(3600)
