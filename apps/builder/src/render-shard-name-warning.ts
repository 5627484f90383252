// The build's warning (stderr, not with --json) of bindings of a shard name recorded from other
// files than the model's (a `shard-name-shared` progress event), before it binds anything.
import { describeLinkingSnapshots, describeOtherModel, isOtherModel, type LinkingFiles } from './find-other-revision.js';
import { fitReportLines } from './format-units.js';
import { quoteForShell } from './quote-for-shell.js';
import { showName } from './show-name.js';

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * The warning lines (without newlines) for one shard name, within 120 columns as gc's and inspect's
 * text (fitReportLines: a warning was one line of ~860 columns); `out` is the cache as the user named it.
 */
export function renderShardNameWarning(event: { shardName: string; file: string; bindings: number; otherRevision?: LinkingFiles & { bindings: number } }, out: string): string[] {
  const lines: string[] = [];
  if (event.bindings > 0) {
    lines.push(
      `splitzip build: warning: the cache holds ${plural(event.bindings, 'binding')} of shard name ${showName(event.shardName)} recorded from another file than ${showName(event.file)} (another model's file of that name, or an earlier copy of this one replaced by a new file), at spans or of shapes this model's tensors do not have: \`splitzip gc ${quoteForShell(out)} --model\` of either model removes the other's (which binds them again at its next load, one hash pass each); keep models whose shard names collide in caches of their own`,
    );
  }
  const other = event.otherRevision;
  if (other !== undefined && other.bindings > 0 && isOtherModel(other)) {
    // Not another revision: a pipeline's other component, whose shard has this one's name, in use.
    lines.push(
      `splitzip build: warning: the cache holds ${plural(other.bindings, 'binding')} of shard name ${showName(event.shardName)} recorded from ${describeOtherModel(other)}, a file of that name in this Hugging Face hub repository, at spans or of shapes the tensors of ${showName(event.file)} do not have: ` +
        "that model's loads use them (`gc --model` of either keeps them while its file is in blobs/). One cache binds a slice to one file of a shard name: where the models' tensors differ at one span, a build stops (SLICE_CONFLICT), and --rebind moves the slice to the model built, " +
        "whose gain is the other's loss (its loads then read that tensor raw); keep models whose shard names collide (each component of a pipeline) in caches of their own",
    );
  } else if (other !== undefined && other.bindings > 0) {
    // A hub tree tells what stamps cannot: the file they were recorded with is still in blobs/.
    lines.push(
      `splitzip build: warning: the cache holds ${plural(other.bindings, 'binding')} of shard name ${showName(event.shardName)} recorded from another revision of this Hugging Face hub repository than ${showName(event.file)}, at spans or of shapes this revision's tensors do not have: ` +
        `that revision's file is still in the repository's blobs/ and ${describeLinkingSnapshots(other)}, so its loads use them (\`gc --model\` of either revision keeps them while that file is in blobs/). ` +
        "One cache binds a slice to one revision: where the revisions' tensors differ at one span, a build stops (SLICE_CONFLICT), and --rebind moves the slice to the revision built, " +
        "whose gain is the other's loss (its loads then read that tensor raw); give each revision a cache of its own",
    );
  }
  return fitReportLines(lines);
}
