//! ResNets: the CIFAR ResNet-20 of He et al. 2016 (§4.2, 6n+2 layers with n = 3,
//! option A identity shortcuts: subsample and zero-pad, no parameters; names as in the
//! widely used `akamaster/pytorch_resnet_cifar10`) and torchvision's ImageNet
//! bottleneck ResNet-50/152 (v1.5: the stride sits on the 3×3 conv; projection
//! shortcut `downsample` = 1×1 conv + BN on the first block of each stage).

use super::{batchnorm, conv2d, linear, window_out, Hw, Model, Tensor};

/// CIFAR ResNet with `n` basic blocks per stage (depth 6n + 2), widths 16/32/64.
fn cifar_resnet(name: &str, n: usize, classes: usize, variant: &str) -> Model {
    let mut t: Vec<Tensor> = Vec::new();
    let mut hw: Hw = (32, 32);
    hw = conv2d(&mut t, "conv1", 3, 16, 3, 1, 1, 1, false, hw);
    batchnorm(&mut t, "bn1", 16, hw);
    let mut cin = 16;
    for (stage, width) in [16usize, 32, 64].into_iter().enumerate() {
        for b in 0..n {
            let stride = if stage > 0 && b == 0 { 2 } else { 1 };
            let p = format!("layer{}.{b}", stage + 1);
            hw = conv2d(
                &mut t,
                &format!("{p}.conv1"),
                cin,
                width,
                3,
                stride,
                1,
                1,
                false,
                hw,
            );
            batchnorm(&mut t, &format!("{p}.bn1"), width, hw);
            hw = conv2d(
                &mut t,
                &format!("{p}.conv2"),
                width,
                width,
                3,
                1,
                1,
                1,
                false,
                hw,
            );
            batchnorm(&mut t, &format!("{p}.bn2"), width, hw);
            // Option A shortcut: no parameters.
            cin = width;
        }
    }
    // Global average pooling, then the classifier.
    linear(&mut t, "linear", cin, classes, true, 1);
    Model {
        name: name.into(),
        variant: variant.into(),
        tensors: t,
        default_batch: 128,
        input: "3x32x32",
    }
}

/// CIFAR ResNet-20 (n = 3), 10 classes.
pub fn resnet20() -> Model {
    cifar_resnet(
        "resnet20",
        3,
        10,
        "CIFAR ResNet-20, parameter-free (option A) shortcuts, 10 classes",
    )
}

/// torchvision bottleneck ResNet with `blocks` bottlenecks per stage on 224² images.
fn bottleneck_resnet(
    name: &str,
    blocks: [usize; 4],
    classes: usize,
    default_batch: usize,
    variant: &str,
) -> Model {
    const EXPANSION: usize = 4;
    let mut t: Vec<Tensor> = Vec::new();
    let mut hw: Hw = (224, 224);
    hw = conv2d(&mut t, "conv1", 3, 64, 7, 2, 3, 1, false, hw);
    batchnorm(&mut t, "bn1", 64, hw);
    hw = window_out(hw, 3, 2, 1); // maxpool
    let mut cin = 64;
    for (stage, &nblocks) in blocks.iter().enumerate() {
        let width = 64 << stage;
        let cout = width * EXPANSION;
        for b in 0..nblocks {
            let stride = if stage > 0 && b == 0 { 2 } else { 1 };
            let p = format!("layer{}.{b}", stage + 1);
            let hw_in = hw;
            let h1 = conv2d(
                &mut t,
                &format!("{p}.conv1"),
                cin,
                width,
                1,
                1,
                0,
                1,
                false,
                hw_in,
            );
            batchnorm(&mut t, &format!("{p}.bn1"), width, h1);
            let h2 = conv2d(
                &mut t,
                &format!("{p}.conv2"),
                width,
                width,
                3,
                stride,
                1,
                1,
                false,
                h1,
            );
            batchnorm(&mut t, &format!("{p}.bn2"), width, h2);
            let h3 = conv2d(
                &mut t,
                &format!("{p}.conv3"),
                width,
                cout,
                1,
                1,
                0,
                1,
                false,
                h2,
            );
            batchnorm(&mut t, &format!("{p}.bn3"), cout, h3);
            if b == 0 {
                let hd = conv2d(
                    &mut t,
                    &format!("{p}.downsample.0"),
                    cin,
                    cout,
                    1,
                    stride,
                    0,
                    1,
                    false,
                    hw_in,
                );
                assert_eq!(hd, h3);
                batchnorm(&mut t, &format!("{p}.downsample.1"), cout, hd);
            }
            hw = h3;
            cin = cout;
        }
    }
    // Adaptive average pooling to 1×1, then the classifier.
    linear(&mut t, "fc", cin, classes, true, 1);
    Model {
        name: name.into(),
        variant: variant.into(),
        tensors: t,
        default_batch,
        input: "3x224x224",
    }
}

/// torchvision ResNet-50 (3, 4, 6, 3 bottlenecks), 1000 classes.
pub fn resnet50() -> Model {
    bottleneck_resnet(
        "resnet50",
        [3, 4, 6, 3],
        1000,
        64,
        "torchvision ResNet-50, 1000 classes",
    )
}

/// torchvision ResNet-152 (3, 8, 36, 3 bottlenecks), 1000 classes.
pub fn resnet152() -> Model {
    bottleneck_resnet(
        "resnet152",
        [3, 8, 36, 3],
        1000,
        32,
        "torchvision ResNet-152, 1000 classes",
    )
}
