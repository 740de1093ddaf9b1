// memlint for VS Code: starts `memlint lsp` and hands it Python, JSON, YAML and shell files
// (and memlint's settings files).
// Everything else (diagnostics, hovers, estimates, quick fixes, settings) is the server's.

import { execFile } from "child_process";
import * as fs from "fs";
import * as vscode from "vscode";
import {
  Executable,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";
import { BudgetView, OPEN_COMMAND } from "./budgetView";

const INSTALL_HINT = "pip install 'memlint[lsp]'";
let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel | undefined;
// the server's lens command (other editors log the sheet); here the lens opens the budget view
const SERVER_LENS_COMMAND = "memlint.showBudget";

// The part of the Python extension's API used here (ms-python.python exports it).
interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string } | undefined;
    resolveEnvironment(path: string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
  };
  settings?: {
    getExecutionDetails(resource?: vscode.Uri): { execCommand: string[] | undefined };
  };
}

function firstExisting(paths: string[]): string | undefined {
  return paths.find((p) => p.length > 0 && fs.existsSync(p));
}

// Does this interpreter have memlint with its LSP extra? (A quick import, not a server start.)
function hasMemlint(command: string[]): Promise<boolean> {
  return new Promise((resolve) => {
    const [program, ...args] = command;
    execFile(program, [...args, "-c", "import memlint.lsp, pygls.lsp.server"], { timeout: 15000 }, (error) =>
      resolve(!error),
    );
  });
}

async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string[] | undefined> {
  const extension = vscode.extensions.getExtension<PythonExtensionApi>("ms-python.python");
  if (!extension) {
    return undefined;
  }
  const api = extension.isActive ? extension.exports : await extension.activate();
  const active = api.environments?.getActiveEnvironmentPath(resource);
  if (active) {
    const resolved = await api.environments?.resolveEnvironment(active.path);
    const executable = resolved?.executable.uri?.fsPath;
    if (executable) {
      return [executable];
    }
  }
  return api.settings?.getExecutionDetails(resource).execCommand;
}

// memlint.path, else memlint.interpreter, else the Python extension's interpreter (when it
// has memlint), else `memlint` on PATH.
async function serverCommand(): Promise<{ command: string; args: string[]; from: string }> {
  const settings = vscode.workspace.getConfiguration("memlint");
  const executable = firstExisting(settings.get<string[]>("path", []));
  if (executable) {
    return { command: executable, args: ["lsp"], from: "memlint.path" };
  }
  const interpreter = settings.get<string[]>("interpreter", []);
  if (interpreter.length > 0) {
    return { command: interpreter[0], args: [...interpreter.slice(1), "-m", "memlint", "lsp"], from: "memlint.interpreter" };
  }
  const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
  const python = await pythonExtensionInterpreter(resource);
  if (python && python.length > 0 && (await hasMemlint(python))) {
    return { command: python[0], args: [...python.slice(1), "-m", "memlint", "lsp"], from: "the Python extension's interpreter" };
  }
  return { command: "memlint", args: ["lsp"], from: "PATH" };
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  const { command, args, from } = await serverCommand();
  output?.info(`starting ${command} ${args.join(" ")} (from ${from})`);
  const run: Executable = { command, args, transport: TransportKind.stdio };
  const serverOptions: ServerOptions = { run, debug: run };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "file", language: "json" },
      { scheme: "file", language: "jsonc" },
      { scheme: "file", language: "yaml" },
      // launchers (`accelerate launch`, `deepspeed`, `torchrun` in run.sh) and the settings files
      { scheme: "file", language: "shellscript" },
      { scheme: "file", pattern: "**/*.{slurm,sbatch}" },
      { scheme: "file", pattern: "**/{pyproject,memlint,.memlint}.toml" },
    ],
    outputChannel: output,
    middleware: {
      async provideCodeLenses(document, token, next) {
        const lenses = (await next(document, token)) ?? [];
        for (const lens of lenses) {
          if (lens.command?.command === SERVER_LENS_COMMAND) {
            lens.command = { title: lens.command.title, command: OPEN_COMMAND, arguments: [document.uri] };
          }
        }
        return lenses;
      },
    },
    initializationOptions: { settings: vscode.workspace.getConfiguration("memlint") },
    synchronize: { configurationSection: "memlint" },
  };
  client = new LanguageClient("memlint", "memlint", serverOptions, clientOptions);
  try {
    await client.start();
  } catch (error) {
    client = undefined;
    const message = `memlint: could not start \`${command} ${args.join(" ")}\` (${error}). Install it with ${INSTALL_HINT}, or set memlint.interpreter or memlint.path.`;
    output?.error(message);
    void vscode.window.showErrorMessage(message);
    return;
  }
  context.subscriptions.push({ dispose: () => void client?.stop() });
}

async function restart(context: vscode.ExtensionContext): Promise<void> {
  if (client) {
    const running = client;
    client = undefined;
    await running.stop();
  }
  await start(context);
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("memlint", { log: true });
  const budgetView = new BudgetView(() => client);
  context.subscriptions.push(
    output,
    budgetView,
    vscode.commands.registerCommand(OPEN_COMMAND, (uri?: vscode.Uri) => budgetView.show(uri)),
    vscode.commands.registerCommand("memlint.restart", () => restart(context)),
    vscode.commands.registerCommand("memlint.showLogs", () => output?.show()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      // the server re-reads its own settings; where it runs from needs a restart
      if (event.affectsConfiguration("memlint.path") || event.affectsConfiguration("memlint.interpreter")) {
        void restart(context);
      }
    }),
  );
  await start(context);
}

export async function deactivate(): Promise<void> {
  if (client) {
    await client.stop();
  }
}
