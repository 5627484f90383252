/**
 * How huggingface_hub names a repository's directory (`<type>s--<org>--<name>`). Required of a
 * parent, not of `--out` itself: a directory far above that merely holds refs/ and snapshots/ (a
 * project's own) is not a hub repository.
 */
export const HUB_REPO_NAME = /^(models|datasets|spaces)--./;
