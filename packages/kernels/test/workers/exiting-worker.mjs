// A decode worker that exits as it starts, with no error.
process.exit(3);
