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
