"""DCGAN, as TorchBench's ``dcgan`` trains it (a port of pytorch/examples ``dcgan/main.py``).

The original has a Generator (``ConvTranspose2d`` stack nz -> ngf*8 -> ngf*4 -> ngf*2 -> ngf -> nc,
4x4 kernels, BatchNorm and in-place ReLU, Tanh out) and a Discriminator (``Conv2d`` stack
nc -> ndf -> ndf*2 -> ndf*4 -> ndf*8 -> 1, BatchNorm from the second layer, in-place
LeakyReLU(0.2), Sigmoid out), with nz=100, ngf=ndf=64, nc=3 and 64x64 images, initialised by
``weights_init`` (convolutions N(0, 0.02), BatchNorm weight N(1, 0.02) and bias 0). TorchBench's
``_train`` feeds ``randn`` images as the "real" batch and, per iteration, runs the discriminator
on the real batch (BCE against label 1), the generator on fresh noise, the discriminator on
``fake.detach()`` (BCE against 0), and after the D update the discriminator on ``fake`` again
(BCE against 1, the generator's loss).

Here one module holds both networks; its forward takes (real images, noise), does those four
passes and returns the three BCE losses (labels made with ``torch.full`` as in the original),
and :meth:`DcGan.loss` sums them into the one scalar the benchmark's backward starts from.
The discriminator runs three times in training mode, so its BatchNorm running statistics are
updated three times per iteration, as in the original.

Differences, all forced by one forward and one backward per iteration: there is no optimizer
step between the discriminator's and the generator's losses, so the third pass sees the same
discriminator weights as the first two, and the discriminator's gradient also holds the
generator loss's share (the original computes it too but zeroes it before it is used). The
original reuses one label tensor with ``fill_``; that would modify a tensor BCE saved for
backward, so each loss gets its own, in the images' dtype (``torch.float`` in the original, the
same in a float32 run; it lets the benchmark's float64 check run the model). The ``.item()`` statistics (D_x, D_G_z1, D_G_z2) are only
logged by the original and are left out.

For "tiny", the architecture (which fixes 64x64 images) is kept with nz=8 and ngf=ndf=4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grace.bench.workloads import Size, Workload, generator, register

IMAGE_SIZE = 64
NC = 3


def _dims(size: Size) -> tuple[int, int, int]:
    """(nz, ngf, ndf)."""
    return (100, 64, 64) if size == "full" else (8, 4, 4)


def _build(size: Size) -> Any:
    import torch
    from torch import nn

    nz, ngf, ndf = _dims(size)

    def weights_init(m: nn.Module) -> None:
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    class Generator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
                nn.BatchNorm2d(ngf * 8),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf * 4),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf, NC, 4, 2, 1, bias=False),
                nn.Tanh(),
            )

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(NC, ndf, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 4),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 8),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
                nn.Sigmoid(),
            )

        def forward(self, input):
            return self.main(input)

    class DcGanTrainStep(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.netG = Generator()
            self.netG.apply(weights_init)
            self.netD = Discriminator()
            self.netD.apply(weights_init)
            self.criterion = nn.BCELoss()
            self.real_label = 1.0
            self.fake_label = 0.0

        def forward(self, real_images, noise):
            b_size = real_images.size(0)
            label = torch.full((b_size,), self.real_label, dtype=real_images.dtype, device=real_images.device)
            output = self.netD(real_images).view(-1)
            errD_real = self.criterion(output, label)

            fake = self.netG(noise)
            label = torch.full((b_size,), self.fake_label, dtype=real_images.dtype, device=real_images.device)
            output = self.netD(fake.detach()).view(-1)
            errD_fake = self.criterion(output, label)

            label = torch.full((b_size,), self.real_label, dtype=real_images.dtype, device=real_images.device)
            output = self.netD(fake).view(-1)
            errG = self.criterion(output, label)
            return errD_real, errD_fake, errG

    return DcGanTrainStep()


@dataclass(frozen=True)
class DcGan(Workload):
    def build(self, device: str, batch_size: int, size: Size = "full") -> Any:
        return _build(size).to(device).train()

    def inputs(self, model: Any, sample: int, device: str, batch_size: int, size: Size = "full") -> tuple:
        import torch

        nz, _, _ = _dims(size)
        gen = generator(device, sample)
        real = torch.randn(batch_size, NC, IMAGE_SIZE, IMAGE_SIZE, device=device, generator=gen)
        noise = torch.randn(batch_size, nz, 1, 1, device=device, generator=gen)
        return (real, noise)

    def loss(self, output: Any) -> Any:
        errD_real, errD_fake, errG = output
        return errD_real + errD_fake + errG


register(DcGan("DCGAN", "dcgan", "torchbench", "training", 32,
               idiom="none: BatchNorm running-stat updates (three discriminator passes), "
                     "in-place activations"))
