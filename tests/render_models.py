"""Real-PyTorch models for the picture tests and docs/make_pictures.py (torchvision is not installed, so the
residual net is written here): each is traced for one training step and returns the trace document."""

import warnings

import gradviz


def _torch():
    import torch

    return torch


def resnet(blocks_per_stage=(2, 2, 2, 2), width=4):
    """A ResNet-18-shaped net: stem, four stages of basic blocks (two 3×3 convs with batch norm and a skip; the
    first block of a stage that narrows the picture has a 1×1 downsample on the skip), pooling, a linear head."""
    torch = _torch()
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            skip = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + skip)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU()
            stages, cin = [], width
            for number, count in enumerate(blocks_per_stage):
                cout = width * 2 ** number
                stages.append(nn.Sequential(*[BasicBlock(cin if i == 0 else cout, cout, 2 if i == 0 and number else 1)
                                              for i in range(count)]))
                cin = cout
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, 10)

        def forward(self, x):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    torch.manual_seed(0)
    model = ResNet()
    return model, torch.randn(2, 3, 16, 16), torch.tensor([1, 3])


def transformer(layers=2):
    """A 2-layer TransformerEncoder classifier, as the issue's report ran it."""
    torch = _torch()
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            return self.head(self.encoder(x).mean(dim=1))

    torch.manual_seed(0)
    return Classifier(), torch.randn(2, 5, 16), torch.tensor([1, 3])


def bert(layers=4):
    """A BERT-like encoder: token, position and segment embeddings, layer norm, ``layers`` encoder layers, a pooler
    and two heads (masked tokens and next sentence)."""
    torch = _torch()
    nn = torch.nn

    class Bert(nn.Module):
        def __init__(self, vocab=50, width=16, length=6):
            super().__init__()
            self.tokens = nn.Embedding(vocab, width)
            self.positions = nn.Embedding(length, width)
            self.segments = nn.Embedding(2, width)
            self.norm = nn.LayerNorm(width)
            layer = nn.TransformerEncoderLayer(d_model=width, nhead=2, dim_feedforward=2 * width, dropout=0.0,
                                               batch_first=True, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
            self.pooler = nn.Linear(width, width)
            self.mlm = nn.Linear(width, vocab)
            self.nsp = nn.Linear(width, 2)

        def forward(self, ids, segments):
            positions = torch.arange(ids.shape[1]).unsqueeze(0)
            x = self.norm(self.tokens(ids) + self.positions(positions) + self.segments(segments))
            x = self.encoder(x)
            return self.mlm(x), self.nsp(torch.tanh(self.pooler(x[:, 0])))

    torch.manual_seed(0)
    model = Bert()
    ids = torch.randint(0, 50, (2, 6))
    return model, (ids, torch.zeros(2, 6, dtype=torch.long)), ids


def traced_step(model, inputs, target, steps=1):
    """The trace document of ``steps`` training steps (forward, cross-entropy loss, backward, SGD step)."""
    torch = _torch()
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gradviz.trace(engine="torch") as tr:
            for _ in range(steps):
                opt.zero_grad()
                out = model(*inputs)
                if isinstance(out, tuple):
                    loss = torch.nn.functional.cross_entropy(out[0].flatten(0, 1), target.flatten()) + \
                        out[1].logsumexp(1).mean()
                else:
                    loss = torch.nn.functional.cross_entropy(out, target)
                loss.backward()
                opt.step()
    return tr.to_dict()
