// Shared by test/browser.test.ts and bench/run-bench.mjs: a local HTTP server on 127.0.0.1 that
// serves the built browser bundles and the test page, and headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core; never `playwright install`). Every wait is
// bounded; the browser is always closed, and killed by its PID if closing hangs.
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

export const CHROMIUM_PATH = process.env.SPLITZIP_CHROMIUM ?? '/usr/bin/chromium';
const here = dirname(fileURLToPath(import.meta.url));
const packageRoot = join(here, '..', '..');
const require = createRequire(join(packageRoot, 'package.json'));

/** Flags seen working as root on these machines (shared/notes/browser.md). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-gpu',
  '--enable-unsafe-swiftshader',
  '--enable-unsafe-webgpu',
  '--disable-dev-shm-usage',
];

const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html', '.map': 'application/json' };

/** Serves /, /page.js, /gpu-browser.js, /gpu-shim.js, /codec/* and /kernels/* (the dist folders). */
export async function startPageServer() {
  const codecDist = dirname(require.resolve('@splitzip/codec'));
  const kernelsDist = join(packageRoot, 'dist');
  const gpuBrowser = require.resolve('gpu.js/dist/gpu-browser.js');
  for (const path of [join(codecDist, 'index.js'), join(kernelsDist, 'index.js'), gpuBrowser]) {
    if (!existsSync(path)) throw new Error(`browser harness: ${path} is missing; build @splitzip/codec and @splitzip/kernels first`);
  }
  const routes = new Map([
    ['/', join(here, 'page.html')],
    ['/page.js', join(here, 'page.js')],
    ['/gpu-browser.js', gpuBrowser],
  ]);
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    // Cross-origin isolation: SharedArrayBuffer for gpu.js's threaded webasm.
    const headers = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp', 'Cache-Control': 'no-store' };
    if (url.pathname === '/gpu-shim.js') {
      response.writeHead(200, { ...headers, 'Content-Type': 'text/javascript' });
      response.end('export default globalThis.GPU;\n');
      return;
    }
    let file = routes.get(url.pathname);
    for (const [prefix, root] of [['/codec/', codecDist], ['/kernels/', kernelsDist]]) {
      if (!file && url.pathname.startsWith(prefix)) {
        const candidate = normalize(join(root, url.pathname.slice(prefix.length)));
        if (candidate.startsWith(root)) file = candidate;
      }
    }
    if (!file || !existsSync(file) || !statSync(file).isFile()) {
      response.writeHead(404, headers);
      response.end('not found');
      return;
    }
    response.writeHead(200, { ...headers, 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' });
    createReadStream(file).pipe(response);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Rejects after `ms` with a message naming what was waited for. */
export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Launches Chromium (fresh temporary profile) and opens the test page; `close()` always ends it. */
export async function openTestPage(url, { timeoutMs = 60_000 } = {}) {
  const { chromium } = await import('playwright-core');
  const server = await chromium.launchServer({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_ARGS,
    timeout: timeoutMs,
  });
  const pid = server.process().pid;
  let browser = null;
  const close = async () => {
    try {
      if (browser) await withTimeout(browser.close(), 10_000, 'browser.close()');
      await withTimeout(server.close(), 10_000, 'browser server close()');
    } catch {
      // fall through to the kill
    }
    try {
      if (pid) process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  try {
    browser = await withTimeout(chromium.connect(server.wsEndpoint(), { timeout: timeoutMs }), timeoutMs, 'connect to Chromium');
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(url, { timeout: timeoutMs });
    await page.waitForFunction(() => window.pageReady === true, undefined, { timeout: timeoutMs }).catch((error) => {
      throw new Error(`test page did not load: ${errors.join('; ') || error.message}`);
    });
    return { page, errors, close };
  } catch (error) {
    await close();
    throw error;
  }
}
