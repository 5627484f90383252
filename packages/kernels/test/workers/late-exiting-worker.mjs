// A decode worker that exits while it loads, after a while (killed during its start-up), before it reports ready.
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
process.exit(7);
