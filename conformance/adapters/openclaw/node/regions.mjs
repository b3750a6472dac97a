// Finding OpenClaw's functions by the source file they come from. dist/ holds thousands of
// chunks with hashed names that change every release; each chunk marks the source files it holds
// with `//#region src/...` lines and exports its functions under one-letter aliases. A lookup
// names the source file and the function, and fails naming both when a release moved them.
import fs from "node:fs";
import path from "node:path";

const REGION = /^\/\/#region (src\/\S+)$/gm;

/** source file -> chunk file names holding its region; cached beside the install (one per release). */
function regionIndex(dist, cacheFile) {
  if (cacheFile && fs.existsSync(cacheFile)) return JSON.parse(fs.readFileSync(cacheFile, "utf8"));
  const index = {};
  for (const file of fs.readdirSync(dist).sort()) {
    if (!/\.(m?js)$/.test(file)) continue;
    const text = fs.readFileSync(path.join(dist, file), "utf8");
    for (const match of text.matchAll(REGION)) (index[match[1]] ??= []).push(file);
  }
  if (cacheFile) fs.writeFileSync(cacheFile, JSON.stringify(index));
  return index;
}

export class Regions {
  constructor(dist, cacheFile) {
    this.dist = dist;
    this.index = regionIndex(dist, cacheFile);
  }

  /** The module exporting `name`, defined in `source`'s region, and the name it is exported as. */
  locate(source, name) {
    const files = this.index[source];
    if (!files) throw new Error(`OpenClaw moved ${source}: no chunk of ${this.dist} has a //#region ${source} marker (the adapter needs ${name} from it)`);
    const unexported = [];
    const defines = new RegExp(`^(?:async )?function\\*? ${name}\\(|^(?:const|let|var|class) ${name}\\b`, "m");
    for (const file of files) {
      const text = fs.readFileSync(path.join(this.dist, file), "utf8");
      const start = text.indexOf(`//#region ${source}\n`);
      const end = text.indexOf("//#endregion", start);
      if (!defines.test(text.slice(start, end))) continue;
      const exported = [...text.matchAll(/^export \{([^}]*)\};?$/gm)].flatMap((m) => m[1].split(","));
      for (const entry of exported) {
        const [local, alias] = entry.trim().split(/\s+as\s+/);
        if (local === name) return { file: path.join(this.dist, file), alias: alias ?? local };
      }
      unexported.push(file);
    }
    if (unexported.length) throw new Error(`OpenClaw's ${source} defines ${name} in ${unexported.join(", ")} but no chunk exports it`);
    throw new Error(`OpenClaw moved ${name}: no chunk's ${source} region defines it (looked in ${files.join(", ")})`);
  }

  async load(source, name) {
    const { file, alias } = this.locate(source, name);
    const mod = await import(file);
    if (typeof mod[alias] !== "function") throw new Error(`OpenClaw's ${name} (${source}, ${path.basename(file)} as ${alias}) is not a function`);
    return mod[alias];
  }
}
