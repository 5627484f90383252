// A decode worker whose script throws as it loads, after a while (a slow start, or a large bundle):
// the calling thread has finished its decode alone by then.
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
throw new Error('worker script threw late on load');
