// Preloaded (node --import) into the CLI: records every flag it passes to v8.setFlagsFromString, as
// a FLAGS line on stderr at exit. syncBuiltinESMExports carries the wrapper to `import { … } from 'node:v8'`.
import v8 from 'node:v8';
import { syncBuiltinESMExports } from 'node:module';

const set = v8.setFlagsFromString;
const flags = [];
v8.setFlagsFromString = (flag) => {
  flags.push(flag);
  set(flag);
};
syncBuiltinESMExports();
process.on('exit', () => process.stderr.write(`FLAGS ${JSON.stringify(flags)}\n`));
