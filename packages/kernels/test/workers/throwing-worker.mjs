// A decode worker whose script throws as it loads (as a bundle's broken or missing worker does).
throw new Error('worker script threw on load');
