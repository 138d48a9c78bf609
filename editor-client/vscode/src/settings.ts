/**
 * Settings (`fastcoder.*`) → server `initializationOptions`.
 *
 * `toInitOptions` is pure; `readSettings` reads VS Code's configuration through the
 * `vscode` module (mocked in the unit tests).
 */
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';

export const SECTION = 'fastcoder';

export const DTYPES = ['auto', 'float32', 'bfloat16'] as const;
export const DEVICES = ['auto', 'cpu', 'cuda'] as const;
export const PACK_WEIGHTS = ['auto', 'on', 'off'] as const;
export const METHODS = ['fastcoder', 'ar', 'pld', 'rest'] as const;
export const LAYOUTS = ['anchored', 'psm'] as const;

export interface FastCoderSettings {
    enabled: boolean;
    model: string;
    dtype: string;
    device: string;
    /** CPU: linear weights packed for oneDNN (`auto`: where a probe at load measured it faster). */
    packWeights: string;
    method: string;
    /** Plain AR for a document while its drafter is measured slower (same output). */
    arFallback: boolean;
    maxNewTokens: number;
    /** null/undefined: the server's default (2000 ms). */
    timeBudgetMs: number | null;
    /** Client-only: the `fastcoder` executable. */
    serverPath: string;
    /** Interpreter for `python -m fastcoder_cli serve`; also sent to the server. */
    pythonPath: string;
    /** Prompt layout: `anchored` (typing only extends the prompt) or `psm`. */
    promptLayout: string;
    /** Wait before a model run until the document has been still: `auto` (50 ms) or ms. */
    debounceMs: number | 'auto';
    /** Compute the suggestion after accepting the shown one in the background. */
    prefetch: boolean;
    /** A statement being typed may be completed past its line (false: to its line end unless the line opens a block). */
    midLineBlocks: boolean;
    /** End a suggestion where greedy decoding loops or writes a control character. */
    stopDegenerate: boolean;
    /** Where the cursor rests, prepare the suggestion in the background (the client reports the place). */
    warmAtCursor: boolean;
    /** Put other workspace files (definitions, open documents) in the prompt. */
    crossFileContext: boolean;
    /** The workspace's name and the document's path before the prompt: `auto` (nearly empty documents), true, false. */
    fileHeader: 'auto' | boolean;
    /** Memory for the open documents' KV caches (MB). */
    kvCacheMb: number;
    /** Disk for the documents' KV caches between server runs (MB; 0: off). */
    kvDiskMb: number;
}

export const DEFAULTS: FastCoderSettings = {
    enabled: true,
    model: 'qwen2.5-coder-0.5b',
    dtype: 'auto',
    device: 'auto',
    packWeights: 'auto',
    method: 'fastcoder',
    arFallback: true,
    maxNewTokens: 128,
    timeBudgetMs: null,
    serverPath: '',
    pythonPath: '',
    promptLayout: 'anchored',
    debounceMs: 'auto',
    prefetch: true,
    midLineBlocks: false,
    stopDegenerate: true,
    warmAtCursor: true,
    crossFileContext: false,
    fileHeader: 'auto',
    kvCacheMb: 256,
    kvDiskMb: 512,
};

/** The JSON object sent as `initializationOptions` (camelCase keys, server contract). */
export interface InitOptions {
    model: string;
    dtype: string;
    device: string;
    packWeights: string;
    method: string;
    arFallback: boolean;
    maxNewTokens: number;
    timeBudgetMs?: number;
    enabled: boolean;
    pythonPath?: string;
    promptLayout: string;
    debounceMs: number | 'auto';
    prefetch: boolean;
    midLineBlocks: boolean;
    stopDegenerate: boolean;
    warmAtCursor: boolean;
    crossFileContext: boolean;
    fileHeader: 'auto' | boolean;
    kvCacheMb: number;
    kvDiskMb: number;
}

/** Settings that need a server restart when they change (they decide how it is started). */
export const RESTART_KEYS: readonly (keyof FastCoderSettings)[] = ['serverPath', 'pythonPath'];

function pick<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
    return typeof value === 'string' && (allowed as readonly string[]).includes(value) ? (value as T) : fallback;
}

function positiveInt(value: unknown): number | undefined {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
        return undefined;
    }
    const n = Math.floor(value);
    return n >= 1 ? n : undefined;
}

function nonNegativeInt(value: unknown): number | undefined {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
        return undefined;
    }
    const n = Math.floor(value);
    return n >= 0 ? n : undefined;
}

function debounce(value: unknown): number | 'auto' {
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 5000) {
        return Math.floor(value);
    }
    return 'auto';
}

function str(value: unknown): string {
    return typeof value === 'string' ? value.trim() : '';
}

/** Normalize a raw settings object (values may be missing or of the wrong type). */
export function normalizeSettings(raw: Partial<Record<keyof FastCoderSettings, unknown>>): FastCoderSettings {
    return {
        enabled: typeof raw.enabled === 'boolean' ? raw.enabled : DEFAULTS.enabled,
        model: str(raw.model) || DEFAULTS.model,
        dtype: pick(raw.dtype, DTYPES, 'auto'),
        device: pick(raw.device, DEVICES, 'auto'),
        packWeights: pick(raw.packWeights, PACK_WEIGHTS, 'auto'),
        method: pick(raw.method, METHODS, 'fastcoder'),
        arFallback: typeof raw.arFallback === 'boolean' ? raw.arFallback : DEFAULTS.arFallback,
        maxNewTokens: positiveInt(raw.maxNewTokens) ?? DEFAULTS.maxNewTokens,
        timeBudgetMs: positiveInt(raw.timeBudgetMs) ?? null,
        serverPath: str(raw.serverPath),
        pythonPath: str(raw.pythonPath),
        promptLayout: pick(raw.promptLayout, LAYOUTS, 'anchored'),
        debounceMs: debounce(raw.debounceMs),
        prefetch: typeof raw.prefetch === 'boolean' ? raw.prefetch : DEFAULTS.prefetch,
        midLineBlocks: typeof raw.midLineBlocks === 'boolean' ? raw.midLineBlocks : DEFAULTS.midLineBlocks,
        stopDegenerate: typeof raw.stopDegenerate === 'boolean' ? raw.stopDegenerate : DEFAULTS.stopDegenerate,
        warmAtCursor: typeof raw.warmAtCursor === 'boolean' ? raw.warmAtCursor : DEFAULTS.warmAtCursor,
        crossFileContext:
            typeof raw.crossFileContext === 'boolean' ? raw.crossFileContext : DEFAULTS.crossFileContext,
        fileHeader: typeof raw.fileHeader === 'boolean' || raw.fileHeader === 'auto' ? raw.fileHeader : DEFAULTS.fileHeader,
        kvCacheMb: positiveInt(raw.kvCacheMb) ?? DEFAULTS.kvCacheMb,
        kvDiskMb: nonNegativeInt(raw.kvDiskMb) ?? DEFAULTS.kvDiskMb,
    };
}

/** Settings → `initializationOptions`. Unset optional values are left out. */
export function toInitOptions(settings: FastCoderSettings): InitOptions {
    const opts: InitOptions = {
        model: settings.model,
        dtype: settings.dtype,
        device: settings.device,
        packWeights: settings.packWeights,
        method: settings.method,
        arFallback: settings.arFallback,
        maxNewTokens: settings.maxNewTokens,
        enabled: settings.enabled,
        promptLayout: settings.promptLayout,
        debounceMs: settings.debounceMs,
        prefetch: settings.prefetch,
        midLineBlocks: settings.midLineBlocks,
        stopDegenerate: settings.stopDegenerate,
        warmAtCursor: settings.warmAtCursor,
        crossFileContext: settings.crossFileContext,
        fileHeader: settings.fileHeader,
        kvCacheMb: settings.kvCacheMb,
        kvDiskMb: settings.kvDiskMb,
    };
    if (settings.timeBudgetMs !== null && settings.timeBudgetMs !== undefined) {
        opts.timeBudgetMs = settings.timeBudgetMs;
    }
    if (settings.pythonPath) {
        opts.pythonPath = settings.pythonPath;
    }
    return opts;
}

/**
 * Expand `~`, `${userHome}`, `${workspaceFolder}` and `${env:NAME}` in a path setting;
 * a relative path (containing a separator) is taken relative to the first workspace folder.
 */
export function expandPath(
    value: string,
    workspaceFolder: string | undefined,
    env: NodeJS.ProcessEnv = process.env,
    home: string = os.homedir(),
): string {
    if (!value) {
        return value;
    }
    let out = value
        .replace(/\$\{userHome\}/g, home)
        .replace(/\$\{env:([^}]+)\}/g, (_m, name: string) => env[name] ?? '');
    if (workspaceFolder !== undefined) {
        out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
    }
    if (out === '~') {
        out = home;
    } else if (out.startsWith('~/') || out.startsWith('~\\')) {
        out = path.join(home, out.slice(2));
    }
    const hasSep = out.includes('/') || out.includes('\\');
    if (hasSep && !path.isAbsolute(out) && workspaceFolder !== undefined) {
        out = path.resolve(workspaceFolder, out);
    }
    return out;
}

export function firstWorkspaceFolder(): string | undefined {
    const folders = vscode.workspace.workspaceFolders;
    return folders && folders.length > 0 ? folders[0].uri.fsPath : undefined;
}

/** Read `fastcoder.*` from VS Code's configuration (path settings expanded). */
export function readSettings(): FastCoderSettings {
    const cfg = vscode.workspace.getConfiguration(SECTION);
    const raw: Partial<Record<keyof FastCoderSettings, unknown>> = {};
    for (const key of Object.keys(DEFAULTS) as (keyof FastCoderSettings)[]) {
        raw[key] = cfg.get(key);
    }
    const settings = normalizeSettings(raw);
    const ws = firstWorkspaceFolder();
    settings.serverPath = expandPath(settings.serverPath, ws);
    settings.pythonPath = expandPath(settings.pythonPath, ws);
    return settings;
}

/** True when a configuration change affects a setting that needs a server restart. */
export function needsRestart(event: vscode.ConfigurationChangeEvent): boolean {
    return RESTART_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`));
}
