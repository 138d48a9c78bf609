/**
 * A small fake of the `vscode` module for unit tests:
 *   vi.mock('vscode', async () => (await import('./vscode.mock')).createVscodeMock());
 * Tests reach the fake's state through `import * as vscode from 'vscode'` and the
 * `__test` helpers it exposes.
 */
import { vi } from 'vitest';

export class Position {
    constructor(
        public line: number,
        public character: number,
    ) {}
}

export class Range {
    start: Position;
    end: Position;
    constructor(start: Position, end: Position);
    constructor(sl: number, sc: number, el: number, ec: number);
    constructor(a: Position | number, b: Position | number, c?: number, d?: number) {
        if (typeof a === 'number') {
            this.start = new Position(a, b as number);
            this.end = new Position(c as number, d as number);
        } else {
            this.start = a;
            this.end = b as Position;
        }
    }
    get isEmpty(): boolean {
        return this.start.line === this.end.line && this.start.character === this.end.character;
    }
}

export class Selection extends Range {
    constructor(
        public anchor: Position,
        public active: Position,
    ) {
        super(anchor, active);
    }
}

export class ThemeColor {
    constructor(public id: string) {}
}

export class Disposable {
    constructor(private readonly fn: () => void = () => undefined) {}
    dispose(): void {
        this.fn();
    }
}

export function createVscodeMock() {
    const config: Record<string, unknown> = {};
    const workspaceConfig: Record<string, unknown> = {};
    const configListeners: ((e: { affectsConfiguration(s: string): boolean }) => void)[] = [];
    const commands = new Map<string, (...args: unknown[]) => unknown>();

    const makeChannel = (name: string) => ({
        name,
        lines: [] as string[],
        appendLine: vi.fn(function (this: { lines: string[] }, line: string) {
            this.lines.push(line);
        }),
        append: vi.fn(),
        clear: vi.fn(function (this: { lines: string[] }) {
            this.lines.length = 0;
        }),
        show: vi.fn(),
        hide: vi.fn(),
        dispose: vi.fn(),
        info: vi.fn(),
        warn: vi.fn(),
        error: vi.fn(),
        debug: vi.fn(),
        trace: vi.fn(),
    });

    const fireConfigChange = (keys: string[]) => {
        const event = {
            affectsConfiguration: (section: string) =>
                keys.some((k) => k === section || k.startsWith(section + '.')),
        };
        for (const l of [...configListeners]) {
            l(event);
        }
    };

    const workspace = {
        workspaceFolders: [{ uri: { fsPath: '/ws', toString: () => 'file:///ws' }, name: 'ws', index: 0 }] as
            | { uri: { fsPath: string; toString(): string }; name: string; index: number }[]
            | undefined,
        getConfiguration: vi.fn((section: string) => ({
            get: (key: string, fallback?: unknown) => {
                const full = `${section}.${key}`;
                if (full in workspaceConfig) return workspaceConfig[full];
                return full in config ? config[full] : fallback;
            },
            inspect: (key: string) => ({
                key: `${section}.${key}`,
                globalValue: config[`${section}.${key}`],
                workspaceValue: workspaceConfig[`${section}.${key}`],
            }),
            update: vi.fn(async (key: string, value: unknown, target?: number) => {
                const full = `${section}.${key}`;
                if (target === 2) workspaceConfig[full] = value;
                else config[full] = value;
                fireConfigChange([full]);
            }),
            has: (key: string) => `${section}.${key}` in config,
        })),
        onDidChangeConfiguration: vi.fn((listener: (e: { affectsConfiguration(s: string): boolean }) => void) => {
            configListeners.push(listener);
            return new Disposable(() => configListeners.splice(configListeners.indexOf(listener), 1));
        }),
    };

    const window = {
        activeTextEditor: undefined as unknown,
        createStatusBarItem: vi.fn((id?: string, alignment?: number, priority?: number) => ({
            id,
            alignment,
            priority,
            name: '',
            text: '',
            tooltip: '' as unknown,
            command: undefined as unknown,
            backgroundColor: undefined as unknown,
            show: vi.fn(),
            hide: vi.fn(),
            dispose: vi.fn(),
        })),
        createOutputChannel: vi.fn((name: string) => makeChannel(name)),
        showErrorMessage: vi.fn(async (..._args: unknown[]) => undefined as unknown),
        showWarningMessage: vi.fn(async (..._args: unknown[]) => undefined as unknown),
        showInformationMessage: vi.fn(async (..._args: unknown[]) => undefined as unknown),
        showInputBox: vi.fn(async (..._args: unknown[]) => undefined as string | undefined),
        setStatusBarMessage: vi.fn(() => new Disposable()),
        onDidChangeTextEditorSelection: vi.fn((_listener: (e: unknown) => void) => new Disposable()),
        withProgress: vi.fn(
            async (_opts: unknown, task: (progress: unknown, token: unknown) => Promise<unknown>) =>
                task({ report: vi.fn() }, { isCancellationRequested: false, onCancellationRequested: vi.fn() }),
        ),
    };

    const mod = {
        Position,
        Range,
        Selection,
        ThemeColor,
        Disposable,
        StatusBarAlignment: { Left: 1, Right: 2 },
        ConfigurationTarget: { Global: 1, Workspace: 2, WorkspaceFolder: 3 },
        ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
        Uri: {
            file: (fsPath: string) => ({ fsPath, scheme: 'file', toString: () => `file://${fsPath}` }),
            parse: (s: string) => ({ fsPath: s.replace(/^file:\/\//, ''), scheme: 'file', toString: () => s }),
        },
        workspace,
        window,
        commands: {
            registerCommand: vi.fn((id: string, fn: (...args: unknown[]) => unknown) => {
                if (commands.has(id)) {
                    throw new Error(`command '${id}' already exists`);
                }
                commands.set(id, fn);
                return new Disposable(() => commands.delete(id));
            }),
            executeCommand: vi.fn(async (id: string, ...args: unknown[]) => commands.get(id)?.(...args)),
        },
        __test: {
            config,
            workspaceConfig,
            commands,
            fireConfigChange,
            reset() {
                for (const k of Object.keys(config)) delete config[k];
                for (const k of Object.keys(workspaceConfig)) delete workspaceConfig[k];
                commands.clear();
                configListeners.length = 0;
                window.activeTextEditor = undefined;
                workspace.workspaceFolders = [
                    { uri: { fsPath: '/ws', toString: () => 'file:///ws' }, name: 'ws', index: 0 },
                ];
            },
        },
    };
    return mod;
}

export type VscodeMock = ReturnType<typeof createVscodeMock>;
