// Loaded with `node --import` before the CLI: registers hold-cli-load-hooks.mjs, which holds the
// load of the module that defines runCli (the whole CLI: commands, store, codec) until the test
// says so. A signal sent meanwhile arrives while the CLI is loading, every time.
import { register } from 'node:module';

register('./hold-cli-load-hooks.mjs', import.meta.url, { data: { holdDir: process.env.SPLITZIP_TEST_HOLD_DIR } });
