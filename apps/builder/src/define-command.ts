// A small declared-command model (citty-like): each command is an object with a name, a
// description, an args spec and a `run`. The parser (parse-command-args.ts) and the help renderer
// (render-command-help.ts) read the same spec, so help can never drift from what is accepted.

export interface PositionalArgSpec {
  type: 'positional';
  description: string;
  valueHint?: string;
  required?: boolean;
}

export interface StringArgSpec {
  type: 'string';
  description: string;
  valueHint?: string;
  required?: boolean;
  default?: string;
  choices?: readonly string[];
}

export interface NumberArgSpec {
  type: 'number';
  description: string;
  valueHint?: string;
  default?: number;
  min?: number;
  max?: number;
  integer?: boolean;
}

export interface BooleanArgSpec {
  type: 'boolean';
  description: string;
  default?: boolean;
}

export type ArgSpec = PositionalArgSpec | StringArgSpec | NumberArgSpec | BooleanArgSpec;
export type ArgsSpec = Record<string, ArgSpec>;

type ValueOf<S extends ArgSpec> = S extends BooleanArgSpec
  ? boolean
  : S extends NumberArgSpec
    ? S extends { default: number }
      ? number
      : number | undefined
    : S extends { required: true }
      ? string
      : S extends { default: string }
        ? string
        : string | undefined;

export type ParsedArgs<A extends ArgsSpec> = { [K in keyof A]: ValueOf<A[K]> };

/** Where a command writes; the CLI passes the process streams, tests may pass others. */
export interface CommandIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
}

export interface CommandContext<A extends ArgsSpec> {
  args: ParsedArgs<A>;
  io: CommandIo;
  /** Aborted on SIGINT/SIGTERM so long work can stop between safe points. */
  signal: AbortSignal;
  /** Frees dropped buffers now (see BuildCacheOptions.collectGarbage); absent in library use. */
  collectGarbage?: () => void;
}

export interface CommandDef<A extends ArgsSpec = ArgsSpec> {
  name: string;
  description: string;
  /** Extra lines printed at the end of `--help` (examples, exit codes). */
  notes?: readonly string[];
  args: A;
  /** Returns the exit status; only the CLI's main turns it into the process exit code. */
  run(context: CommandContext<A>): Promise<number>;
}

export function defineCommand<A extends ArgsSpec>(command: CommandDef<A>): CommandDef<A> {
  return command;
}
