// The budget view: the server's budget page (memlint.budgetView) for the document's runs in a
// webview beside the editor, updated as the documents change; its Apply buttons make a change
// with the edit the server sent along.

import * as crypto from "crypto";
import * as vscode from "vscode";
import { LanguageClient } from "vscode-languageclient/node";

export const OPEN_COMMAND = "memlint.openBudgetView";
const SERVER_COMMAND = "memlint.budgetView";
const UPDATE_DELAY_MS = 300;

interface LspRange {
  start: { line: number; character: number };
  end: { line: number; character: number };
}
interface BudgetPage {
  html: string;
  edits: ({ [uri: string]: { range: LspRange; newText: string }[] } | null)[];
  stale: boolean;
}

export class BudgetView implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private uri: vscode.Uri | undefined;
  private page: BudgetPage | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly client: () => LanguageClient | undefined) {
    this.subscriptions.push(
      // any document may change the run (run.sh for train.py): the page follows all of them
      vscode.workspace.onDidChangeTextDocument(() => this.scheduleUpdate()),
      vscode.workspace.onDidSaveTextDocument(() => this.scheduleUpdate()),
    );
  }

  async show(uri?: vscode.Uri): Promise<void> {
    const target = uri ?? vscode.window.activeTextEditor?.document.uri;
    if (!target) {
      return;
    }
    this.uri = target;
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel("memlint.budget", "memlint budget", vscode.ViewColumn.Beside, {
        enableScripts: true,
        localResourceRoots: [],
      });
      this.panel.onDidDispose(() => (this.panel = undefined), undefined, this.subscriptions);
      this.panel.webview.onDidReceiveMessage((message) => this.apply(message), undefined, this.subscriptions);
    }
    this.panel.reveal(vscode.ViewColumn.Beside, true);
    await this.update();
  }

  private scheduleUpdate(): void {
    if (!this.panel) {
      return;
    }
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => void this.update(), UPDATE_DELAY_MS);
  }

  private async update(): Promise<void> {
    const client = this.client();
    if (!this.panel || !this.uri || !client) {
      return;
    }
    const page = (await client.sendRequest("workspace/executeCommand", {
      command: SERVER_COMMAND,
      arguments: [this.uri.toString()],
    })) as BudgetPage | null;
    if (!this.panel) {
      return;
    }
    this.page = page ?? undefined;
    this.panel.title = `memlint budget: ${this.uri.path.split("/").pop()}`;
    this.panel.webview.html = page ? withScript(page.html) : emptyPage(this.uri);
  }

  private async apply(message: unknown): Promise<void> {
    const index = (message as { apply?: unknown })?.apply;
    const edits = typeof index === "number" ? this.page?.edits[index] : undefined;
    if (!edits) {
      return;
    }
    const edit = new vscode.WorkspaceEdit();
    for (const [uri, textEdits] of Object.entries(edits)) {
      for (const { range, newText } of textEdits) {
        const r = new vscode.Range(range.start.line, range.start.character, range.end.line, range.end.character);
        edit.replace(vscode.Uri.parse(uri), r, newText);
      }
    }
    await vscode.workspace.applyEdit(edit);
  }

  dispose(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.panel?.dispose();
    this.subscriptions.forEach((s) => s.dispose());
  }
}

// The page has no script of its own (it is also the CLI's artifact): the webview adds the one
// that posts an Apply button's index back, under a content security policy with a nonce.
function withScript(html: string): string {
  const nonce = crypto.randomBytes(16).toString("base64");
  const policy = `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-${nonce}';">`;
  const script = `<script nonce="${nonce}">
const vscode = acquireVsCodeApi();
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-apply]");
  if (button) { vscode.postMessage({ apply: Number(button.dataset.apply) }); }
});
</script>`;
  return html.replace("<head>", `<head>${policy}`).replace("</body>", `${script}</body>`);
}

function emptyPage(uri: vscode.Uri): string {
  const name = uri.path.split("/").pop() ?? "";
  return `<!DOCTYPE html><html><body><p>memlint: no training run in ${name.replace(/[<>&]/g, "")}.</p></body></html>`;
}
