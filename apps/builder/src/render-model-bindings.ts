// The text lines of a ModelBindingsReport, for `gc --model` and `inspect --model`.
// `1 binding`, `2 bindings`, with thousands separators, as every count of the text reports.
import { fitReportLines, formatCountOf as plural } from './format-units.js';
import { describeLinkingSnapshots, isOtherModel } from './find-other-revision.js';
import type { ModelBindingsReport, PrunedBinding } from './judge-model-bindings.js';
import { quoteForShell } from './quote-for-shell.js';
import { showName } from './show-name.js';

const VERDICT_TEXT: Record<Exclude<PrunedBinding['verdict'], 'other-shard'>, string> = {
  leftover: "at no tensor's span now",
  mismatched: 'to an entry of another dtype or shape than the tensor there now',
  superseded: 'recorded with the file before it changed, beside its binding now',
};
/** A group's text where its bindings were recorded against s3:// objects only (ETags: PrunedBinding.otherObject), no local file. */
const OBJECT_VERDICT_TEXT: Partial<Record<keyof typeof VERDICT_TEXT, string>> = {
  superseded: "recorded against another revision's s3:// object (an ETag), beside this file's binding now",
};

/**
 * `verb`: what happened to the bindings judged to go ('removed', 'would remove'); `cache`: named in
 * the command lines the text suggests. Lines within 120 columns (fitReportLines), for inspect as for gc.
 */
export function renderModelBindings(report: ModelBindingsReport, cache: string, verb: string): string[] {
  // Another model of the snapshot (a pipeline's component of the same shard name) is not another revision.
  const withBlobPath = (group: ModelBindingsReport['otherRevisions'][number]) => ({ ...group, blobPaths: [group.blobPath] });
  const modelGroups = report.otherRevisions.filter((group) => isOtherModel(group));
  const revisionGroups = report.otherRevisions.filter((group) => !isOtherModel(group));
  const otherModel = modelGroups.reduce((sum, group) => sum + group.bindings, 0);
  const otherRevision = report.otherRevision - otherModel;
  const unlisted = report.blobsUnlisted;
  const isS3 = /^s3:\/\//i.test(cache);
  // Recorded against s3:// objects only (ETags, a directory cache): another object revision's, not a file a save replaced.
  const otherObjectKept = report.otherObjectKept;
  const otherFileKept = report.otherFileKept - otherObjectKept;
  const own = report.live + report.unchecked + report.otherRevision + (unlisted?.bindings ?? 0) + report.otherFileKept + report.leftover + report.mismatched + report.superseded;
  const lines = [
    `model ${report.model}: ${plural(own, 'binding')} of its ${plural(report.shards.length, 'shard name')}: ${report.live} live, ${report.unchecked} unchecked, ` +
      (otherRevision > 0 ? `${otherRevision} another revision's (kept), ` : '') +
      (otherModel > 0 ? `${otherModel} another model's of the snapshot (kept), ` : '') +
      (unlisted !== undefined ? `${unlisted.bindings} from other files, unjudged (kept), ` : '') +
      (otherFileKept > 0 ? `${otherFileKept} other files' (kept), ` : '') +
      (otherObjectKept > 0 ? `${otherObjectKept} other s3:// object revisions' (kept), ` : '') +
      (report.superseded > 0 ? `${report.superseded} superseded by the file's binding now, ` : '') +
      `${report.leftover} left behind at no tensor's span, ${report.mismatched} to an entry of another dtype or shape than the tensor there`,
  ];
  // Per shard name and verdict: a re-shard of a thousand tensors is a line per shard, not a thousand lines (--json lists each).
  const groups = new Map<string, number>();
  for (const binding of report.prune) {
    if (binding.verdict === 'other-shard') continue; // listed with the other shard names below
    const group = `${binding.shardName}\n${binding.verdict}\n${binding.otherObject === true ? 'object' : ''}`;
    groups.set(group, (groups.get(group) ?? 0) + 1);
  }
  const count = report.dryRun ? report.prune.length : report.removed;
  // The store counts what it removed: a binding judged to go that another writer removed, or bound
  // again, since this command looked is not counted (the lines below list what was judged).
  const partial = !report.dryRun && report.removed < report.prune.length;
  lines.push(
    `${verb} ${plural(count, 'binding')}${partial ? ` (of ${report.prune.length} judged to go: another writer removed or bound the others again since, left as they are)` : ''}${groups.size > 0 ? (partial ? '; judged to go:' : ':') : ''}`,
  );
  for (const [group, n] of groups) {
    const [shardName, verdict, object] = group.split('\n') as [string, keyof typeof VERDICT_TEXT, string];
    lines.push(`  ${showName(shardName)}: ${n} ${(object === 'object' ? OBJECT_VERDICT_TEXT[verdict] : undefined) ?? VERDICT_TEXT[verdict]}`);
  }
  // A shared shard name (text_encoder/model.safetensors and text_encoder_2/model.safetensors in one
  // cache): the other model's bindings are judged left behind. The stamps tell another file, not whose.
  if (report.otherFiles > 0 && report.pruneOtherFiles) {
    // The user's word (--prune-other-files): those files were this model's, replaced.
    const objects = report.prune.filter((binding) => binding.otherObject === true).length;
    const from =
      objects === report.otherFiles
        ? "recorded against other revisions of s3:// objects of that shard name, not this model's files (--prune-other-files: judged as this model's"
        : `bound from other files of that shard name than this model's (--prune-other-files: judged as this model's replaced files'${objects > 0 ? `, ${objects} of them other s3:// object revisions'` : ''}`;
    lines.push(`  ${plural(report.otherFiles, 'of them was', 'of them were')} ${from}; ${describeRebinding(report, cache, 'another revision or model of the same shard names that used them')})`);
  } else if (report.otherFiles > 0) {
    lines.push(
      `  ${plural(report.otherFiles, 'of them was', 'of them were')} bound from another file of that shard name than this model's (another inode: another model's file of the same name sharing the cache, or this model's earlier file replaced by a new one; the cache records no paths, so gc cannot tell which): ${describeRebinding(report, cache, `the model whose bindings ${report.dryRun ? 'these are' : 'these were'}`)}${isS3 ? '; keep models whose shard names collide in caches of their own' : ''}`,
    );
  }
  if (otherObjectKept > 0) {
    // FILE-BINDINGS.md phase 3: an s3:// model's revisions (ETags) bound beside this file's; no save of a local file made them.
    lines.push(
      `  kept ${plural(otherObjectKept, 'binding')} recorded against other revisions of s3:// objects of this model's shard names (ETags: an s3:// model's revisions bound beside this file's): ` +
        "their loads use them; they go once 8 newer files' or revisions' bindings of their slice push them out (MAX_SLICE_BINDINGS)",
    );
  }
  if (otherFileKept > 0) {
    // One binding per file (0.56): another revision's or model's bindings of these shard names sit beside this file's.
    lines.push(
      `  kept ${plural(otherFileKept, 'binding')} recorded with other files of this model's shard names (another inode: another revision or model of the same shard names bound beside this one, or this model's file before a save replaced it; the cache records no paths): ` +
        "their loads use them; they go once 8 newer files' bindings of their slice push them out (MAX_SLICE_BINDINGS), or, where they are this model's files before a download replaced them, " +
        `by \`splitzip gc ${quoteForShell(cache)} --model ${quoteForShell(report.model)} --prune-other-files\` once its files now are built`,
    );
  }
  if (otherRevision > 0) {
    // A hub tree tells what stamps cannot: the file they were recorded with is still in blobs/, so
    // they are another revision's, in use, not a replaced file's (find-other-revision.ts).
    lines.push(
      `  kept ${plural(otherRevision, 'binding')} recorded from another revision of this Hugging Face hub repository, whose file is still in its blobs/: that revision's loads use them; ` +
        (isS3
          ? "this one's loads read those tensors raw (their bytes checked: where a tensor is the same in both revisions, the binding serves both). " +
            'An s3:// cache binds a slice to one revision: give each revision a cache of its own; '
          : "this one's build binds its tensors beside them (a directory cache keeps a binding per file), and its loads use those. ") +
        "gc --model removes such bindings once that revision's file is gone from blobs/ (`huggingface-cli delete-cache`):",
    );
    for (const group of revisionGroups) {
      lines.push(`  ${showName(group.shardName)}: ${group.bindings} recorded from blobs/${group.blob} (${describeLinkingSnapshots(withBlobPath(group))})`);
    }
  }
  if (otherModel > 0) {
    lines.push(
      `  kept ${plural(otherModel, 'binding')} recorded from another model of a snapshot of this Hugging Face hub repository whose file has this one's shard name (a pipeline's text_encoder/ and text_encoder_2/ model.safetensors): that model's loads use them; ` +
        (isS3
          ? "this one's loads read those tensors raw (their bytes checked). An s3:// cache binds a slice to one file of a shard name: keep models whose shard names collide (each component of a pipeline) in caches of their own:"
          : "this one's build binds its tensors beside them (a directory cache keeps a binding per file), and its loads use those:"),
    );
    for (const group of modelGroups) {
      lines.push(`  ${showName(group.shardName)}: ${group.bindings} recorded from blobs/${group.blob} (${describeLinkingSnapshots(withBlobPath(group))})`);
    }
  }
  if (unlisted !== undefined) {
    lines.push(
      `  kept ${plural(unlisted.bindings, 'binding')} recorded only with other files of this model's shard names: this Hugging Face hub repository's blobs/ could not be listed (${unlisted.code}), ` +
        `so whether another revision's file still in it was recorded with them is unknown; gc --model removes them once ${quoteForShell(`${unlisted.repo}/blobs`)} can be listed`,
    );
  }
  if (report.unchecked > 0 && isS3) {
    // Builds record no file stamps in a bucket (a file stamp is one host's), and this command keeps none on the host.
    lines.push(
      `  kept ${plural(report.unchecked, 'unchecked binding')} (at a tensor's span, to an entry of its shape): an s3:// cache keeps no file stamps in the bucket, so only the bytes tell whether they are the file's; a load checks each once per host`,
    );
  } else if (report.unchecked > 0) {
    lines.push(
      `  kept ${plural(report.unchecked, 'unchecked binding')} (at a tensor's span, to an entry of its shape, with no record of the file as it is now: a copy, a touched or rewritten file):` +
        ` a load checks each once and keeps it when the bytes are the entry's; \`splitzip verify ${quoteForShell(cache)} --model ${quoteForShell(report.model)}\` names those that are not, and \`splitzip build ${quoteForShell(report.model)} --out ${quoteForShell(cache)} --rebind\` rebinds them`,
    );
  }
  // Another model with the same shard names (model-00001-of-00002.safetensors is common) has all of
  // its bindings judged left behind: nothing said it was likely the wrong model.
  if (report.live + report.unchecked === 0 && report.leftover + report.mismatched > 0) {
    lines.push(
      `note: none of the model's tensors is bound in this cache: if it is not a model this cache serves, the ${report.dryRun ? 'bindings above would be' : 'bindings removed were'} another model's of the same shard names, which binds them again at its next load (one hash pass each)`,
    );
  }
  if (report.otherShards.length > 0) {
    const total = report.otherShards.reduce((sum, shard) => sum + shard.bindings, 0);
    lines.push(
      report.pruneOtherShards
        ? `${plural(total, 'binding')} of ${plural(report.otherShards.length, 'shard name')} not in the model (--prune-other-shards: ${report.dryRun ? 'would go' : 'gone'}; a model that uses them binds them again at its next load, by content key, one hash pass):`
        : `kept ${plural(total, 'binding')} of ${plural(report.otherShards.length, 'shard name')} not in the model (another model's sharing the cache, or this one's before a rename; --prune-other-shards removes them, and a model that uses them binds them again at its next load, by content key, one hash pass):`,
    );
    for (const shard of report.otherShards) lines.push(`  ${showName(shard.shardName)}: ${shard.bindings}`);
  }
  return fitReportLines(lines);
}

/**
 * What the model whose bindings a prune removed (recorded with other files) does at its next loads:
 * binds a slice the prune left unbound again by content key; beside a binding left there only while
 * the cache holds a second binding of some slice (a load never moves a cache to manifest format 3;
 * never on s3://). Else those tensors stay `stale` until its build. Without the judgement (a report
 * of an older release), the condition is stated. `who`: that model, as the line names it.
 */
function describeRebinding(report: ModelBindingsReport, cache: string, who: string): string {
  const isS3 = /^s3:\/\//i.test(cache);
  const rule = 'a load binds beside another file\'s binding only while the cache holds a second binding of some slice, never moving it to manifest format 3';
  const stale = `reading those tensors raw (\`stale\`, hashed once per process) until ${isS3 ? 'it has a cache of its own' : `\`splitzip build <that model> --out ${quoteForShell(cache)}\` binds them beside`}`;
  const beside = report.otherFilesBeside;
  if (beside === undefined || report.secondBindingHeld === undefined) {
    return `${who} binds them again at its next load (one hash pass each) where their slice is left unbound, or beside the binding left there where the cache still holds a second binding of some slice (${rule}${isS3 ? '; never on s3://' : ''}); else its loads bind none again, ${stale}`;
  }
  const total = report.otherFiles;
  const unbound = total - beside;
  const all = total === 1 ? 'its slice' : 'their slices';
  const parts: string[] = [];
  if (unbound > 0) {
    parts.push(`${unbound === total ? `${all} ${total === 1 ? 'is' : 'are'}` : `${unbound} of their slices ${unbound === 1 ? 'is' : 'are'}`} left unbound: ${who} binds ${unbound === total ? 'them' : 'those'} again at its next load, one hash pass each`);
  }
  if (beside > 0) {
    const keep = `${beside === total ? all : `${beside} of their slices`} ${beside === 1 ? 'keeps' : 'keep'} another binding`;
    const those = beside === total ? 'them' : 'those';
    const would = report.dryRun ? 'would hold' : 'holds';
    if (isS3) parts.push(`${keep}, beside which no load binds on s3://: ${who} binds none of ${those} again at its loads, ${stale}`);
    else if (report.secondBindingHeld) parts.push(`${keep}, and the cache still ${would} a second binding of some slice after this prune (${rule}): ${who} binds ${those} again beside it at its next load, one hash pass each`);
    else parts.push(`${keep}, and the cache ${would} no second binding of any slice after this prune (${rule}): ${who} binds none of ${those} again at its loads, ${stale}`);
  }
  return parts.join('; ');
}
