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
