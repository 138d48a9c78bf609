/**
 * Command implementations. They talk to the server through a small `ClientLike`
 * interface (satisfied by vscode-languageclient's LanguageClient) so the unit tests
 * can pass a fake client; the `vscode` module is mocked there.
 */
import * as vscode from 'vscode';
import { SECTION } from './settings';

export const EXECUTE_COMMAND = 'workspace/executeCommand';

/** Commands the extension contributes (VS Code command ids). */
export const COMMANDS = {
    enable: 'fastcoder.enable',
    disable: 'fastcoder.disable',
    showStats: 'fastcoder.showStats',
    rebuildIndex: 'fastcoder.rebuildIndex',
    editSelection: 'fastcoder.editSelection',
    restartServer: 'fastcoder.restartServer',
    showLog: 'fastcoder.showLog',
} as const;

/** Server-side `workspace/executeCommand` command names. */
export const SERVER_COMMANDS = {
    editSelection: 'fastcoder.editSelection',
    rebuildIndex: 'fastcoder.rebuildIndex',
    stats: 'fastcoder.stats',
} as const;

export interface ProtocolPosition {
    line: number;
    character: number;
}
export interface ProtocolRange {
    start: ProtocolPosition;
    end: ProtocolPosition;
}

export interface ClientLike {
    isRunning(): boolean;
    sendRequest<R>(method: string, params: unknown, token?: vscode.CancellationToken): Promise<R>;
    code2ProtocolConverter: {
        asUri(uri: vscode.Uri): string;
        asRange(range: vscode.Range): ProtocolRange;
    };
}

/** Returns the running client, or undefined (after telling the user) when there is none. */
export type ClientGetter = () => ClientLike | undefined;

function errorText(err: unknown): string {
    if (err && typeof err === 'object' && 'message' in err) {
        return String((err as { message: unknown }).message);
    }
    return String(err);
}

function runningClient(getClient: ClientGetter): ClientLike | undefined {
    const client = getClient();
    if (!client || !client.isRunning()) {
        void vscode.window.showWarningMessage(
            'FastCoder: the language server is not running (see Output → FastCoder, or run "FastCoder: Restart Server").',
        );
        return undefined;
    }
    return client;
}

export function executeServerCommand<R>(
    client: ClientLike,
    command: string,
    args: unknown[] = [],
    token?: vscode.CancellationToken,
): Promise<R> {
    return client.sendRequest<R>(EXECUTE_COMMAND, { command, arguments: args }, token);
}

/** Set `fastcoder.enabled` where it is defined (workspace if overridden there, else user settings). */
export async function setEnabled(enabled: boolean): Promise<void> {
    const cfg = vscode.workspace.getConfiguration(SECTION);
    const info = cfg.inspect<boolean>('enabled');
    const target =
        info && info.workspaceValue !== undefined
            ? vscode.ConfigurationTarget.Workspace
            : vscode.ConfigurationTarget.Global;
    await cfg.update('enabled', enabled, target);
    void vscode.window.setStatusBarMessage(`FastCoder ${enabled ? 'enabled' : 'disabled'}`, 3000);
}

/** `fastcoder.showStats`: executeCommand `fastcoder.stats`, JSON into an output channel. */
export async function showStats(getClient: ClientGetter, channel: vscode.OutputChannel): Promise<unknown> {
    const client = runningClient(getClient);
    if (!client) {
        return undefined;
    }
    try {
        const stats = await executeServerCommand<unknown>(client, SERVER_COMMANDS.stats);
        channel.clear();
        channel.appendLine(`FastCoder stats (${new Date().toISOString()})`);
        channel.appendLine(JSON.stringify(stats ?? null, null, 2));
        channel.show(true);
        return stats;
    } catch (err) {
        void vscode.window.showErrorMessage(`FastCoder: could not get stats: ${errorText(err)}`);
        return undefined;
    }
}

/** `fastcoder.rebuildIndex`: progress comes from the server's `$/progress`. */
export async function rebuildIndex(getClient: ClientGetter): Promise<void> {
    const client = runningClient(getClient);
    if (!client) {
        return;
    }
    const request = executeServerCommand<unknown>(client, SERVER_COMMANDS.rebuildIndex);
    vscode.window.setStatusBarMessage('$(sync~spin) FastCoder: rebuilding index…', request);
    try {
        await request;
    } catch (err) {
        void vscode.window.showErrorMessage(`FastCoder: rebuilding the index failed: ${errorText(err)}`);
    }
}

export interface EditSelectionArgs {
    /** Skip the input box (e.g. from a keybinding with `args`). */
    instruction?: string;
}

export interface EditSelectionResult {
    edit?: { changes?: Record<string, unknown[]>; documentChanges?: unknown[] } | null;
}

function isEmptyEdit(result: EditSelectionResult | null | undefined): boolean {
    const edit = result?.edit;
    if (!edit) {
        return true;
    }
    const nChanges = Object.values(edit.changes ?? {}).reduce((n, v) => n + (Array.isArray(v) ? v.length : 0), 0);
    return nChanges === 0 && (edit.documentChanges ?? []).length === 0;
}

/**
 * `fastcoder.editSelection`: ask for an instruction, then executeCommand
 * `fastcoder.editSelection` with `{uri, range, instruction}`. The server applies the
 * edit itself (workspace/applyEdit), so the returned edit is not applied again here.
 * An empty selection means the whole current line.
 */
export async function editSelection(
    getClient: ClientGetter,
    args?: EditSelectionArgs,
): Promise<EditSelectionResult | undefined> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
        void vscode.window.showWarningMessage('FastCoder: open a file and select the code to edit.');
        return undefined;
    }
    const client = runningClient(getClient);
    if (!client) {
        return undefined;
    }
    let instruction = typeof args?.instruction === 'string' ? args.instruction : undefined;
    if (instruction === undefined) {
        instruction = await vscode.window.showInputBox({
            title: 'FastCoder: Edit Selection',
            prompt: 'Instruction for the selected code',
            placeHolder: 'e.g. add type hints and a docstring',
            ignoreFocusOut: true,
        });
    }
    instruction = instruction?.trim();
    if (!instruction) {
        return undefined;
    }
    const selection = editor.selection;
    const range: vscode.Range = selection.isEmpty ? editor.document.lineAt(selection.active.line).range : selection;
    const params = {
        uri: client.code2ProtocolConverter.asUri(editor.document.uri),
        range: client.code2ProtocolConverter.asRange(range),
        instruction,
    };
    try {
        const result = await vscode.window.withProgress(
            { location: vscode.ProgressLocation.Notification, title: 'FastCoder: editing…', cancellable: true },
            (_progress, token) =>
                executeServerCommand<EditSelectionResult>(client, SERVER_COMMANDS.editSelection, [params], token),
        );
        if (isEmptyEdit(result)) {
            void vscode.window.showInformationMessage('FastCoder: the model proposed no change.');
        }
        return result ?? undefined;
    } catch (err) {
        void vscode.window.showErrorMessage(`FastCoder: edit failed: ${errorText(err)}`);
        return undefined;
    }
}
