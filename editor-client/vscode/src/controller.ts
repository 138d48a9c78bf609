/**
 * The extension's activation code, independent of how the server is reached.
 *
 * `activateWith(context, transport)` registers the commands and starts the language
 * client; the transport only decides how the client talks to `fastcoder serve`:
 * stdio in VS Code (`extension.ts`), a WebSocket in the browser test harness
 * (`editor-client/web-test`). vscode-languageclient registers LSP 3.18 inline
 * completion natively.
 */
import * as vscode from 'vscode';
import { BaseLanguageClient, ExecuteCommandRequest, LanguageClientOptions, State } from 'vscode-languageclient';
import {
    COMMANDS,
    ClientLike,
    editSelection,
    rebuildIndex,
    setEnabled,
    showStats,
} from './commands';
import { CursorReporter, SCHEMES } from './cursor';
import { SECTION, needsRestart, readSettings, toInitOptions } from './settings';
import { STATUS_NOTIFICATION, StatusBar, StatusParams } from './status';

/** Languages the client attaches to (and activates on; keep in sync with package.json). */
export const LANGUAGES = [
    'python',
    'javascript',
    'javascriptreact',
    'typescript',
    'typescriptreact',
    'go',
    'rust',
    'java',
    'c',
    'cpp',
    'csharp',
    'ruby',
    'php',
    'lua',
    'shellscript',
    'kotlin',
    'scala',
    'swift',
];

/**
 * Files, untitled buffers and notebook cells (Jupyter): the server syncs notebooks
 * itself (its `notebookDocumentSync`), so the client sends a cell's text with its
 * notebook and asks for completions in the cell like in a file.
 */
export function documentSelector(): { scheme: string; language: string }[] {
    return LANGUAGES.flatMap((language) => SCHEMES.map((scheme) => ({ scheme, language })));
}

/** How the client reaches the server: one `prepare` per (re)start. */
export interface Transport {
    /**
     * Resolve where the server is; undefined when it cannot be started (the reason is
     * already passed to `report`, once).
     */
    prepare(log: vscode.LogOutputChannel, report: (message: string) => void): Promise<PreparedServer | undefined>;
}

export interface PreparedServer {
    /** For messages, e.g. "fastcoder serve" or "ws://127.0.0.1:8123". */
    description: string;
    createClient(id: string, name: string, clientOptions: LanguageClientOptions): BaseLanguageClient;
}

const OWN_COMMANDS = new Set<string>(Object.values(COMMANDS));

/**
 * vscode-languageclient registers every server-side `workspace/executeCommand` command
 * as a VS Code command of the same id; `fastcoder.editSelection` / `fastcoder.rebuildIndex`
 * are already ours (with UI around them), so drop those from the automatic registration
 * instead of failing with "command already exists".
 */
export function skipOwnServerCommands(client: BaseLanguageClient): void {
    const feature = client.getFeature(ExecuteCommandRequest.method);
    if (!feature || typeof feature.register !== 'function') {
        return;
    }
    const register = feature.register.bind(feature);
    feature.register = (data) => {
        const commands = (data.registerOptions.commands ?? []).filter((c) => !OWN_COMMANDS.has(c));
        register({ ...data, registerOptions: { ...data.registerOptions, commands } });
    };
}

async function reportStartError(statusBar: StatusBar, message: string): Promise<void> {
    statusBar.setClientState('error', message);
    const choice = await vscode.window.showErrorMessage(message, 'Open Settings', 'Show Log');
    if (choice === 'Open Settings') {
        await vscode.commands.executeCommand('workbench.action.openSettings', SECTION);
    } else if (choice === 'Show Log') {
        await vscode.commands.executeCommand(COMMANDS.showLog);
    }
}

/** Starts/stops/restarts the language client. */
export class ServerController implements vscode.Disposable {
    client: BaseLanguageClient | undefined;
    private starting: Promise<boolean> | undefined;

    constructor(
        private readonly statusBar: StatusBar,
        private readonly outputChannel: vscode.LogOutputChannel,
        private readonly transport: Transport,
    ) {}

    getClient = (): ClientLike | undefined => this.client;

    start(): Promise<boolean> {
        if (!this.starting) {
            this.starting = this.doStart().finally(() => {
                this.starting = undefined;
            });
        }
        return this.starting;
    }

    private async doStart(): Promise<boolean> {
        if (this.client) {
            return true;
        }
        this.statusBar.setEnabled(readSettings().enabled);
        this.statusBar.setClientState('starting');
        const server = await this.transport.prepare(this.outputChannel, (message) => {
            void reportStartError(this.statusBar, message);
        });
        if (!server) {
            return false;
        }
        this.outputChannel.info(`Starting ${server.description}`);
        const enabled = () => readSettings().enabled;
        const clientOptions: LanguageClientOptions = {
            documentSelector: documentSelector(),
            synchronize: { configurationSection: SECTION },
            initializationOptions: () => toInitOptions(readSettings()),
            outputChannel: this.outputChannel,
            middleware: {
                // Skip requests while disabled (the server also honours `enabled`).
                provideInlineCompletionItems: (document, position, context, token, next) =>
                    enabled() ? next(document, position, context, token) : undefined,
                provideCompletionItem: (document, position, context, token, next) =>
                    enabled() ? next(document, position, context, token) : undefined,
            },
            // Do not retry; client.start() then rejects and doStart() reports it (once).
            initializationFailedHandler: (error) => {
                this.outputChannel.error(
                    `initialize failed: ${error instanceof Error ? error.message : String(error)}`,
                );
                return false;
            },
        };
        const client = server.createClient('fastcoder', 'FastCoder', clientOptions);
        skipOwnServerCommands(client);
        client.onNotification(STATUS_NOTIFICATION, (params: StatusParams) => this.statusBar.onServerStatus(params));
        client.onDidChangeState((event) => {
            if (event.newState === State.Stopped && this.statusBar.state !== 'error') {
                this.statusBar.setClientState('stopped');
            }
        });
        this.client = client;
        try {
            await client.start();
            return true;
        } catch (err) {
            this.client = undefined;
            const detail = err instanceof Error ? err.message : String(err);
            void reportStartError(
                this.statusBar,
                `FastCoder: could not start the language server (\`${server.description}\`): ${detail}`,
            );
            try {
                await client.dispose();
            } catch {
                // already dead
            }
            return false;
        }
    }

    async stop(): Promise<void> {
        const client = this.client;
        this.client = undefined;
        if (client) {
            try {
                await client.stop(5000);
            } catch (err) {
                this.outputChannel.warn(`stopping the server: ${String(err)}`);
            }
        }
    }

    async restart(): Promise<boolean> {
        await this.starting?.catch(() => false);
        await this.stop();
        return this.start();
    }

    dispose(): void {
        void this.stop();
    }
}

let controller: ServerController | undefined;

export interface FastCoderApi {
    controller: ServerController;
    statusBar: StatusBar;
    statsChannel: vscode.OutputChannel;
}

export async function activateWith(context: vscode.ExtensionContext, transport: Transport): Promise<FastCoderApi> {
    const outputChannel = vscode.window.createOutputChannel('FastCoder', { log: true });
    const statsChannel = vscode.window.createOutputChannel('FastCoder Stats');
    const statusBar = new StatusBar(COMMANDS.showStats);
    controller = new ServerController(statusBar, outputChannel, transport);
    const ctl = controller;
    // where the cursor rests, for the server to prepare the suggestion there (warmAtCursor)
    const cursor = new CursorReporter(
        () => ctl.client,
        () => {
            const settings = readSettings();
            return settings.enabled && settings.warmAtCursor;
        },
        new Set(LANGUAGES),
    );
    context.subscriptions.push(
        outputChannel,
        statsChannel,
        statusBar,
        ctl,
        vscode.commands.registerCommand(COMMANDS.enable, () => setEnabled(true)),
        vscode.commands.registerCommand(COMMANDS.disable, () => setEnabled(false)),
        vscode.commands.registerCommand(COMMANDS.showStats, () => showStats(ctl.getClient, statsChannel)),
        vscode.commands.registerCommand(COMMANDS.rebuildIndex, () => rebuildIndex(ctl.getClient)),
        vscode.commands.registerCommand(COMMANDS.editSelection, (args?: { instruction?: string }) =>
            editSelection(ctl.getClient, args),
        ),
        vscode.commands.registerCommand(COMMANDS.restartServer, () => ctl.restart()),
        vscode.commands.registerCommand(COMMANDS.showLog, () => outputChannel.show(true)),
        cursor,
        vscode.window.onDidChangeTextEditorSelection((event) => cursor.onSelection(event)),
        vscode.workspace.onDidChangeConfiguration((event) => {
            if (!event.affectsConfiguration(SECTION)) {
                return;
            }
            if (event.affectsConfiguration(`${SECTION}.enabled`)) {
                statusBar.setEnabled(readSettings().enabled);
            }
            if (needsRestart(event)) {
                void ctl.restart();
            }
            // Everything else reaches the server through workspace/didChangeConfiguration.
        }),
    );
    // Do not block activation on the model load; errors are reported by start().
    void ctl.start();
    return { controller: ctl, statusBar, statsChannel };
}

export async function deactivate(): Promise<void> {
    const ctl = controller;
    controller = undefined;
    await ctl?.stop();
}
