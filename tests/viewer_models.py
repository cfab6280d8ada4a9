"""Real-PyTorch models for report.html's viewer tests and screenshots (torchvision is not available, so the
ResNet is written here): each function traces a short training loop and returns the trace document."""

import gradviz


def _train(model, inputs, target, iterations, loss_fn):
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with gradviz.trace(engine="torch") as tr:
        for _ in range(iterations):
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), target)
            loss.backward()
            optimizer.step()
    return tr.to_dict()


def transformer_doc(layers=2, iterations=2):
    """A 2-layer ``nn.TransformerEncoder`` regressing a sequence (batch_first)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False),
                          nn.Linear(16, 1))
    x, y = torch.randn(4, 6, 16), torch.randn(4, 6, 1)
    return _train(model, x, y, iterations, nn.functional.mse_loss)


def resnet_doc(blocks=8, iterations=2, width=8):
    """A ResNet-style net: a stem, ``blocks`` residual blocks (conv-bn-relu-conv-bn + identity), a head."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + x)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                                      nn.ReLU())
            self.blocks = nn.Sequential(*[Block(width) for _ in range(blocks)])
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))

    torch.manual_seed(0)
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([1, 3])
    return _train(ResNet(), x, y, iterations, nn.functional.cross_entropy)


def lstm_lm_doc(iterations=3, vocab=50, hidden=16, steps=12):
    """A word-level LSTM language model (embedding, 2-layer LSTM, decoder), as pytorch/examples'
    word_language_model trains it (next-token cross entropy), summing ``total_loss += loss`` without ``.item()``."""
    import torch
    from torch import nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, num_layers=2, batch_first=True)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, tokens):
            out, _ = self.rnn(self.encoder(tokens))
            return self.decoder(out).reshape(-1, vocab)

    torch.manual_seed(0)
    model, tokens = LM(), torch.randint(0, vocab, (4, steps + 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total_loss = 0
    with gradviz.trace(engine="torch") as tr:
        for _ in range(iterations):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(tokens[:, :-1]), tokens[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()
            total_loss += loss  # the classic leak: every iteration's graph stays alive (a diagnostic)
    return tr.to_dict()


def many_structures_doc(structures=20, hidden=8):
    """A GRU cell unrolled over sequences of 1 to ``structures`` steps, one length per iteration: a graph
    structure per length (as a REINFORCE episode or a bucketed batch gives)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    cell, head = nn.GRUCell(4, hidden), nn.Linear(hidden, 1)
    optimizer = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.01)
    with gradviz.trace(engine="torch") as tr:
        for length in range(1, structures + 1):
            optimizer.zero_grad()
            h = torch.zeros(2, hidden)
            for x in torch.randn(length, 2, 4):
                h = cell(x, h)
            loss = head(h).pow(2).mean()
            loss.backward()
            optimizer.step()
    return tr.to_dict()


def unrolled_lstm_lm_doc(iterations=1, vocab=50, hidden=16, steps=35, layers=2):
    """A word-level language model whose ``layers`` LSTM cells are unrolled in Python over ``steps`` tokens (as
    a truncated-BPTT training loop written by hand does): thousands of small ops in one module call."""
    import torch
    from torch import nn

    class Cell(nn.Module):  # written out, as in a from-scratch LSTM: a dozen ops per step
        def __init__(self):
            super().__init__()
            self.input, self.state = nn.Linear(hidden, 4 * hidden), nn.Linear(hidden, 4 * hidden)

        def forward(self, x, hc):
            h, c = hc
            i, f, g, o = (self.input(x) + self.state(h)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, hidden)
            self.cells = nn.ModuleList(Cell() for _ in range(layers))
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, tokens):
            state = [(torch.zeros(tokens.shape[0], hidden), torch.zeros(tokens.shape[0], hidden))] * layers
            outputs = []
            for x in self.encoder(tokens).unbind(1):
                for number, cell in enumerate(self.cells):
                    state[number] = cell(x, state[number])
                    x = state[number][0]
                outputs.append(x)
            return self.decoder(torch.stack(outputs, 1)).reshape(-1, vocab)

    torch.manual_seed(0)
    model, tokens = LM(), torch.randint(0, vocab, (4, steps + 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradviz.trace(engine="torch") as tr:
        for _ in range(iterations):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(tokens[:, :-1]), tokens[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()
    return tr.to_dict()
