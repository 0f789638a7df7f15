"""trident.utils.data: TensorDataset batches gathered in C, a generic Dataset collated, shuffling from Trident's
generator (a seed fixes the order; every item once per epoch), drop_last, Subset/random_split, and Fashion-MNIST
through the C IDX loader against the files' own bytes."""
import gzip
import os

import numpy as np
import pytest

import trident
from trident.utils.data import DataLoader, Dataset, FashionMNIST, TensorDataset, random_split

FASHION = "/usr/share/datasets/fashion-mnist"


def test_tensor_dataset_batches():
    x, y = trident.arange(20.0).reshape(10, 2), trident.arange(10)
    dl = DataLoader(TensorDataset(x, y), batch_size=4)
    batches = list(dl)
    assert len(dl) == len(batches) == 3
    assert batches[0][0].tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]] and batches[2][1].tolist() == [8, 9]
    assert len(DataLoader(TensorDataset(x, y), batch_size=4, drop_last=True)) == 2
    assert len(list(DataLoader(TensorDataset(x, y), batch_size=4, drop_last=True))) == 2


def test_shuffle_is_seeded_and_a_permutation():
    ds = TensorDataset(trident.arange(50))
    trident.manual_seed(3)
    a = [v for (b,) in DataLoader(ds, batch_size=7, shuffle=True) for v in b.tolist()]
    trident.manual_seed(3)
    b = [v for (b,) in DataLoader(ds, batch_size=7, shuffle=True) for v in b.tolist()]
    c = [v for (b,) in DataLoader(ds, batch_size=7, shuffle=True) for v in b.tolist()]
    assert a == b and sorted(a) == list(range(50)) and a != list(range(50)) and c != a


class Squares(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return trident.tensor([float(i)]), i * i


def test_generic_dataset_collate_and_split():
    (x, y), = [b for b in DataLoader(Squares(), batch_size=5)]
    assert x.shape == (5, 1) and y.tolist() == [0, 1, 4, 9, 16]
    trident.manual_seed(0)
    parts = random_split(TensorDataset(trident.arange(10)), [0.7, 0.3])
    assert [len(p) for p in parts] == [7, 3]
    seen = sorted(v for p in parts for (b,) in DataLoader(p, batch_size=3) for v in b.tolist())
    assert seen == list(range(10))


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="no Fashion-MNIST files")
def test_fashion_mnist_through_the_c_loader():
    ds = FashionMNIST(FASHION, train=False)
    assert len(ds) == 10000 and ds.data.shape == (10000, 1, 28, 28) and ds.targets.dtype == trident.int64
    with gzip.open(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")) as f:
        raw = np.frombuffer(f.read()[16:16 + 2 * 784], dtype=np.uint8).reshape(2, 1, 28, 28)
    assert np.abs(ds.data[:2].numpy() - raw / 255.0).max() < 1e-6
    with gzip.open(os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read()[8:18], dtype=np.uint8)
    assert ds.targets[:10].tolist() == labels.tolist()
    xb, yb = next(iter(DataLoader(ds, batch_size=128)))
    assert xb.shape == (128, 1, 28, 28) and yb.shape == (128,)
    with pytest.raises(trident.TridentError):
        FashionMNIST("/nonexistent", train=True)


def test_c_workers_loader_covers_every_sample_once_per_epoch():
    """num_workers > 0: the C DataLoader's threads build the batches; every sample once per epoch, fields kept
    together, another order each epoch, the same orders again after manual_seed, drop_last honoured."""
    x = trident.arange(103, dtype=trident.float32).reshape(103, 1) * 2
    y = trident.arange(103)
    orders = []
    for _ in range(2):
        trident.manual_seed(7)
        dl = DataLoader(TensorDataset(x, y), batch_size=10, shuffle=True, num_workers=2)
        for epoch in range(2):
            seen = []
            for xb, yb in dl:
                assert xb.shape[1:] == (1,) and (xb.reshape(-1) == yb.float() * 2).all()
                seen += yb.tolist()
            assert sorted(seen) == list(range(103)) and len(seen) == 103
            orders.append(seen)
    assert orders[0] != orders[1] and orders[:2] == orders[2:]
    dl = DataLoader(TensorDataset(x, y), batch_size=10, drop_last=True, num_workers=3)
    assert [b[1].tolist()[0] for b in dl] == list(range(0, 100, 10))


def test_cifar10_binary(tmp_path):
    """CIFAR10 reads the binary batches (label byte, then 3 planes of 32x32 bytes) into [N, 3, 32, 32] in [0, 1]."""
    from trident.utils.data import CIFAR10

    rng = np.random.default_rng(0)
    d = tmp_path / "cifar-10-batches-bin"
    d.mkdir()
    recs = {}
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        labels = rng.integers(0, 10, 3, dtype=np.uint8)
        pixels = rng.integers(0, 256, (3, 3072), dtype=np.uint8)
        (d / name).write_bytes(np.concatenate([labels[:, None], pixels], 1).tobytes())
        recs[name] = (labels, pixels)
    train, test = CIFAR10(tmp_path), CIFAR10(tmp_path, train=False)
    assert len(train) == 15 and len(test) == 3 and train.data.shape == (15, 3, 32, 32)
    labels, pixels = recs["data_batch_2.bin"]
    assert train.targets.tolist()[3:6] == labels.tolist()
    np.testing.assert_allclose(train.data[4].numpy().reshape(-1), pixels[1] / 255.0, rtol=1e-6)
    with pytest.raises(trident.TridentError, match="test_batch.bin"):
        (d / "test_batch.bin").write_bytes(b"\x00" * 10)
        CIFAR10(tmp_path, train=False)
