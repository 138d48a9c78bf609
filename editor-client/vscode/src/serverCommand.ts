/**
 * How to start the FastCoder language server.
 *
 * Order: `fastcoder.serverPath` (`<serverPath> serve`), else `fastcoder.pythonPath`
 * (`<python> -m fastcoder_cli serve`), else `fastcoder serve` from PATH. A missing
 * executable yields `{ ok: false, message }` so the extension can show a clear error
 * instead of letting the language client crash on ENOENT.
 */
import * as cp from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

export interface ServerCommand {
    command: string;
    args: string[];
    /** Where the command came from (for messages). */
    source: 'serverPath' | 'pythonPath' | 'PATH';
}

export type Resolution = ({ ok: true } & ServerCommand) | { ok: false; message: string };

export interface FsDeps {
    env: NodeJS.ProcessEnv;
    platform: NodeJS.Platform;
    /** True if `p` is an existing regular file that may be executed. */
    isExecutableFile(p: string): boolean;
}

export function defaultIsExecutableFile(p: string, platform: NodeJS.Platform = process.platform): boolean {
    try {
        const st = fs.statSync(p);
        if (!st.isFile()) {
            return false;
        }
        if (platform === 'win32') {
            return true;
        }
        fs.accessSync(p, fs.constants.X_OK);
        return true;
    } catch {
        return false;
    }
}

export const nodeDeps: FsDeps = {
    env: process.env,
    platform: process.platform,
    isExecutableFile: (p) => defaultIsExecutableFile(p),
};

function hasSeparator(p: string): boolean {
    return p.includes('/') || p.includes('\\');
}

/** Find `name` on PATH (with PATHEXT on Windows); undefined if not found. */
export function findOnPath(name: string, deps: FsDeps = nodeDeps): string | undefined {
    const pathMod = deps.platform === 'win32' ? path.win32 : path.posix;
    const pathVar = deps.env.PATH ?? deps.env.Path ?? '';
    const dirs = pathVar.split(deps.platform === 'win32' ? ';' : ':').filter((d) => d.length > 0);
    const exts =
        deps.platform === 'win32'
            ? ['', ...(deps.env.PATHEXT ?? '.COM;.EXE;.BAT;.CMD').split(';').filter((e) => e.length > 0)]
            : [''];
    for (const dir of dirs) {
        for (const ext of exts) {
            const candidate = pathMod.join(dir, name + ext);
            if (deps.isExecutableFile(candidate)) {
                return candidate;
            }
        }
    }
    return undefined;
}

/** A path setting: a path with a separator must exist; a bare name is looked up on PATH. */
function locate(value: string, deps: FsDeps): string | undefined {
    if (hasSeparator(value)) {
        return deps.isExecutableFile(value) ? value : undefined;
    }
    return findOnPath(value, deps);
}

export function resolveServerCommand(
    settings: { serverPath?: string; pythonPath?: string },
    deps: FsDeps = nodeDeps,
): Resolution {
    const serverPath = (settings.serverPath ?? '').trim();
    const pythonPath = (settings.pythonPath ?? '').trim();
    if (serverPath) {
        const found = locate(serverPath, deps);
        if (!found) {
            return {
                ok: false,
                message:
                    `FastCoder: the server executable "${serverPath}" (setting fastcoder.serverPath) ` +
                    'was not found or is not executable. Fix the setting or clear it to use fastcoder.pythonPath / PATH.',
            };
        }
        return { ok: true, command: found, args: ['serve'], source: 'serverPath' };
    }
    if (pythonPath) {
        const found = locate(pythonPath, deps);
        if (!found) {
            return {
                ok: false,
                message:
                    `FastCoder: the Python interpreter "${pythonPath}" (setting fastcoder.pythonPath) ` +
                    'was not found or is not executable.',
            };
        }
        return { ok: true, command: found, args: ['-m', 'fastcoder_cli', 'serve'], source: 'pythonPath' };
    }
    const found = findOnPath('fastcoder', deps);
    if (!found) {
        return {
            ok: false,
            message:
                'FastCoder: the `fastcoder` executable was not found on PATH. Install it ' +
                '(`pip install fastcoder` in some environment), or set fastcoder.serverPath to the ' +
                '`fastcoder` executable, or fastcoder.pythonPath to a Python interpreter that has it installed.',
        };
    }
    return { ok: true, command: found, args: ['serve'], source: 'PATH' };
}

/** Python snippet: exit 0 if the server's packages can be imported, 3 if not. */
export const PYTHON_PROBE =
    "import importlib.util as u, sys; sys.exit(0 if u.find_spec('fastcoder_cli') and u.find_spec('lsp_server') else 3)";

export type ExecFile = (
    file: string,
    args: string[],
    options: { timeout: number },
    callback: (error: (Error & { code?: unknown }) | null, stdout: string, stderr: string) => void,
) => unknown;

/**
 * For the pythonPath route: check that the interpreter runs and has FastCoder installed.
 * Resolves to undefined when fine, else to an error message.
 */
export function checkPythonHasFastCoder(
    python: string,
    execFile: ExecFile = cp.execFile as unknown as ExecFile,
    timeoutMs = 30000,
): Promise<string | undefined> {
    return new Promise((resolve) => {
        execFile(python, ['-c', PYTHON_PROBE], { timeout: timeoutMs }, (error, _stdout, stderr) => {
            if (!error) {
                resolve(undefined);
            } else if (error.code === 3) {
                resolve(
                    `FastCoder: the Python interpreter "${python}" does not have FastCoder installed ` +
                        '(modules fastcoder_cli / lsp_server not found). Run `' +
                        python +
                        ' -m pip install fastcoder` or point fastcoder.pythonPath at the right environment.',
                );
            } else {
                const detail = (stderr || error.message || '').toString().trim().split('\n').slice(-1)[0];
                resolve(`FastCoder: could not run the Python interpreter "${python}": ${detail}`);
            }
        });
    });
}
