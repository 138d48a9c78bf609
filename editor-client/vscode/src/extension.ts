/**
 * FastCoder VS Code extension entry point: `fastcoder serve` over stdio.
 *
 * The activation code is in `controller.ts` (shared with the browser test harness,
 * which only swaps this stdio transport for a WebSocket); this file resolves the
 * server command from the settings and builds vscode-languageclient's node client.
 */
import * as vscode from 'vscode';
import { LanguageClient, ServerOptions } from 'vscode-languageclient/node';
import { FastCoderApi, Transport, activateWith } from './controller';
import { checkPythonHasFastCoder, resolveServerCommand } from './serverCommand';
import { firstWorkspaceFolder, readSettings } from './settings';

export { FastCoderApi, LANGUAGES, ServerController, deactivate, documentSelector, skipOwnServerCommands } from './controller';

/** Start `<serverPath> serve` / `<python> -m fastcoder_cli serve` / `fastcoder serve` as a child process. */
export const stdioTransport: Transport = {
    async prepare(log, report) {
        const resolution = resolveServerCommand(readSettings());
        if (!resolution.ok) {
            log.error(resolution.message);
            report(resolution.message);
            return undefined;
        }
        if (resolution.source === 'pythonPath') {
            const problem = await checkPythonHasFastCoder(resolution.command);
            if (problem) {
                log.error(problem);
                report(problem);
                return undefined;
            }
        }
        const serverOptions: ServerOptions = {
            command: resolution.command,
            args: resolution.args,
            options: { cwd: firstWorkspaceFolder(), env: { ...process.env } },
        };
        return {
            description: `${resolution.command} ${resolution.args.join(' ')}`,
            createClient: (id, name, clientOptions) => new LanguageClient(id, name, serverOptions, clientOptions),
        };
    },
};

export function activate(context: vscode.ExtensionContext): Promise<FastCoderApi> {
    return activateWith(context, stdioTransport);
}
