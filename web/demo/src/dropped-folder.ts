// The files of a drop or of a folder chosen in the picker: a dropped folder (a checkpoint's
// snapshot: config.json, tokenizer files, model.safetensors or model.safetensors.index.json and
// its shards) gives the files directly inside it, as does a folder chosen with the
// webkitdirectory picker; dropped files are themselves.

/** The files directly in a dropped directory (FileSystemDirectoryEntry; readEntries pages by ~100). */
async function filesIn(dir: FileSystemDirectoryEntry): Promise<File[]> {
  const reader = dir.createReader();
  const entries: FileSystemEntry[] = [];
  for (;;) {
    const page = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (!page.length) break;
    entries.push(...page);
  }
  const files = entries.filter((e): e is FileSystemFileEntry => e.isFile);
  return Promise.all(files.map((f) => new Promise<File>((resolve, reject) => f.file(resolve, reject))));
}

/** What was dropped: each dropped file, and the files directly inside each dropped folder. */
export async function filesOfDrop(dt: DataTransfer | null): Promise<File[]> {
  if (!dt) return [];
  // the entries must be taken while the drop event runs (the list empties after it)
  const entries = [...dt.items].map((i) => (i.kind === 'file' ? i.webkitGetAsEntry?.() ?? null : null));
  const plain = [...dt.files];
  if (!entries.some((e) => e?.isDirectory)) return plain;
  const out: File[] = [];
  for (let k = 0; k < entries.length; k++) {
    const e = entries[k];
    if (e?.isDirectory) out.push(...(await filesIn(e as FileSystemDirectoryEntry)));
    else if (plain[k]) out.push(plain[k]);
  }
  return out;
}

/** The files a webkitdirectory picker gives that lie directly in the chosen folder (not in its subfolders). */
export function filesOfFolder(files: FileList | null): File[] {
  return [...(files ?? [])].filter((f) => (f.webkitRelativePath || f.name).split('/').length <= 2);
}
