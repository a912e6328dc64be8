// Unpacks @sparticuz/chromium's brotli-compressed headless Chromium and the NSS libraries it
// links (the Amazon Linux 2023 bundle: libnss3, libnspr4, libexpat, ...) beside this script, for
// tests/support/browser.py. Node's own zlib reads brotli; nothing is downloaded here.
import { chmodSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { brotliDecompressSync } from "node:zlib";

const bin = new URL("./node_modules/@sparticuz/chromium/bin/", import.meta.url);
const unpack = (name, to) => {
  const partial = new URL(`./${to}.partial`, import.meta.url);
  writeFileSync(partial, brotliDecompressSync(readFileSync(new URL(name, bin))));
  renameSync(partial, new URL(`./${to}`, import.meta.url));
};
unpack("al2023.tar.br", "libraries.tar");
unpack("chromium.br", "chromium");
chmodSync(new URL("./chromium", import.meta.url), 0o755);
