/**
 * The test page: VS Code's editor and extension host (monaco-vscode-api, local
 * extension host in the page), the FastCoder extension's manifest registered, and the
 * extension's own activation code (`activateWith` from ../vscode/src/controller.ts)
 * run with a WebSocket transport instead of stdio.
 *
 * Query: ?root=/abs/workspace&file=rel/path.py&model=NAME[&ws=ws://host:port/lsp] (the
 * playwright scenarios set them). The file is read from disk through the bridge
 * (`/fs/<rel>`) into the workbench's file system. `window.harness` is what the
 * scenarios drive and read.
 */
import '@codingame/monaco-vscode-python-default-extension';
import '@codingame/monaco-vscode-theme-defaults-default-extension';
import * as monaco from '@codingame/monaco-vscode-editor-api';
import { initialize } from '@codingame/monaco-vscode-api';
import { ExtensionHostKind, registerExtension } from '@codingame/monaco-vscode-api/extensions';
import getConfigurationServiceOverride, {
    updateUserConfiguration,
} from '@codingame/monaco-vscode-configuration-service-override';
import {
    RegisteredFileSystemProvider,
    RegisteredMemoryFile,
    registerFileSystemOverlay,
} from '@codingame/monaco-vscode-files-service-override';
import getExtensionsServiceOverride from '@codingame/monaco-vscode-extensions-service-override';
import getKeybindingsServiceOverride from '@codingame/monaco-vscode-keybindings-service-override';
import getLanguagesServiceOverride from '@codingame/monaco-vscode-languages-service-override';
import getModelServiceOverride from '@codingame/monaco-vscode-model-service-override';
import getTextmateServiceOverride from '@codingame/monaco-vscode-textmate-service-override';
import getThemeServiceOverride from '@codingame/monaco-vscode-theme-service-override';
import EditorWorker from '@codingame/monaco-vscode-api/workers/editor.worker?worker';
import TextMateWorker from '@codingame/monaco-vscode-textmate-service-override/worker?worker';
import { SyncDescriptor } from '@codingame/monaco-vscode-api/vscode/vs/platform/instantiation/common/descriptors';
import { EditSuggestionId } from '@codingame/monaco-vscode-api/vscode/vs/editor/common/textModelEditSource';
import { IAiEditTelemetryService } from '@codingame/monaco-vscode-api/vscode/vs/workbench/contrib/editTelemetry/browser/telemetry/aiEditTelemetry/aiEditTelemetryService.service';
import 'vscode/localExtensionHost';
import manifest from '../../vscode/package.json';

const query = new URLSearchParams(location.search);
const wsUrl = query.get('ws') ?? `ws://${location.host}/lsp`;
const root = query.get('root') ?? '/tmp';
const model = query.get('model') ?? 'smollm2-135m';
const file = query.get('file') ?? '';

(window as unknown as { MonacoEnvironment: unknown }).MonacoEnvironment = {
    getWorker(_moduleId: string, label: string) {
        return label === 'TextMateWorker' ? new TextMateWorker() : new EditorWorker();
    },
};

/**
 * VS Code's main thread asks this service for an id each time it shows an inline
 * suggestion; monaco-vscode-api leaves it unimplemented (an "Unsupported" error per
 * suggestion). No telemetry here: ids only.
 */
class NoTelemetryAiEdits {
    readonly _serviceBrand: undefined;
    createSuggestionId() {
        return EditSuggestionId.newId();
    }
    handleCodeAccepted() {}
    handleCodeRejected() {}
}

interface Harness {
    phase: string;
    error?: string;
    [key: string]: unknown;
}
const harness: Harness = { phase: 'loading' };
(window as unknown as { harness: Harness }).harness = harness;

async function main(): Promise<void> {
    const response = await fetch(`./fs/${file}`);
    if (!response.ok) {
        throw new Error(`cannot read ${file}: ${response.status}`);
    }
    const fileUri = monaco.Uri.file(`${root}/${file}`);
    const files = new RegisteredFileSystemProvider(false);
    files.registerFile(new RegisteredMemoryFile(fileUri, await response.text()));
    registerFileSystemOverlay(1, files);
    await initialize(
        {
            ...getExtensionsServiceOverride(),
            ...getModelServiceOverride(),
            ...getConfigurationServiceOverride(),
            ...getLanguagesServiceOverride(),
            ...getKeybindingsServiceOverride(),
            ...getThemeServiceOverride(),
            ...getTextmateServiceOverride(),
            [IAiEditTelemetryService.toString()]: new SyncDescriptor(NoTelemetryAiEdits, [], true),
        },
        undefined,
        {
            workspaceProvider: {
                trusted: true,
                workspace: { folderUri: monaco.Uri.file(root) },
                async open() {
                    return false;
                },
            },
        },
    );
    // What a user would put in settings.json (the extension reads fastcoder.*).
    await updateUserConfiguration(
        JSON.stringify({
            'workbench.colorTheme': 'Default Dark Modern',
            'editor.fontSize': 14,
            'editor.minimap.enabled': false,
            // typed docstrings stay as typed (brackets still auto-close, as by default)
            'editor.autoClosingQuotes': 'never',
            'fastcoder.model': model,
            'fastcoder.dtype': 'float32',
            'fastcoder.device': 'cpu',
            // Server settings outside the extension's contributed ones still reach the
            // server (synchronize.configurationSection sends the whole section): keep the
            // test's CPU work small on a loaded 2-core machine.
            'fastcoder.commonIndex': false,
            'fastcoder.maxPromptTokens': 1024,
        }),
    );
    // The extension's manifest (contributes: configuration, commands); its code runs in
    // this page's local extension host through the `vscode` default API.
    const { main: _main, ...contributed } = manifest as Record<string, unknown>;
    const extension = registerExtension(contributed as never, ExtensionHostKind.LocalProcess);
    await extension.setAsDefaultApi();
    const vscode = await import('vscode');
    const { activateWith } = await import('../../vscode/src/controller');
    const { webSocketTransport } = await import('./wsTransport');
    const subscriptions: { dispose(): unknown }[] = [];
    const api = await activateWith({ subscriptions } as never, webSocketTransport(wsUrl));

    const reference = await monaco.editor.createModelReference(fileUri);
    const editor = monaco.editor.create(document.getElementById('editor')!, {
        model: reference.object.textEditorModel,
        automaticLayout: true,
    });
    editor.focus();
    Object.assign(harness, {
        phase: 'ready',
        api,
        vscode,
        monaco,
        editor: () => editor,
        value: () => editor.getModel()?.getValue(),
        /** Move the cursor (1-based line/column, as Monaco counts). */
        setCursor(line: number, column: number) {
            editor.setPosition({ lineNumber: line, column });
            editor.revealLineInCenter(line);
            editor.focus();
        },
        cursor: () => editor.getPosition(),
        /** Same as Alt+\\ (editor.action.inlineSuggest.trigger). */
        triggerInline: () => editor.trigger('harness', 'editor.action.inlineSuggest.trigger', {}),
        clientState: () => (api.controller.client ? api.controller.client.state : 'none'),
        /** The server's own counters (`fastcoder.stats`). */
        stats: () => api.controller.client?.sendRequest('workspace/executeCommand', { command: 'fastcoder.stats', arguments: [] }),
    });
}

main().catch((err: unknown) => {
    harness.phase = 'error';
    harness.error = err instanceof Error ? `${err.message}\n${err.stack}` : String(err);
    console.error(err);
});
