"""The target GPU from the infrastructure files a project commits, when its settings name none:
slurm batch scripts, SkyPilot tasks, Kubernetes/Kueue manifests, Modal apps, dstack configurations,
Ray jobs and RunPod pods. Each is written the way its users write it; the near misses name no GPU
the catalogue knows, or several."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, write

from memlint.facts.infrastructure import read
from memlint.lint.engine import Linter
from memlint.project.settings import Settings

TRAIN = dedent('''
    import argparse

    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model_name_or_path", default="{model}")
        parser.add_argument("--batch_size", type=int, default=8)
        parser.add_argument("--max_length", type=int, default=2048)
        args = parser.parse_args()
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype="bfloat16")
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
        training_args = TrainingArguments(
            output_dir="out",
            per_device_train_batch_size=args.batch_size,
            gradient_accumulation_steps=4,
            gradient_checkpointing=True,
            bf16=True,
        )
        Trainer(model=model, args=training_args, train_dataset=load_dataset("imdb", split="train"),
                processing_class=tokenizer).train()


    if __name__ == "__main__":
        main()
''')

SLURM = dedent('''
    #!/bin/bash
    #SBATCH --job-name=llama-sft
    #SBATCH --nodes=1
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:{gpu}:8      # one node of eight
    #SBATCH --cpus-per-task=64
    #SBATCH --time=12:00:00

    source .venv/bin/activate
    srun torchrun --nproc_per_node 8 train.py --batch_size {batch}
''')

SKYPILOT = dedent('''
    name: llama-sft

    resources:
      accelerators: {accelerators}
      disk_size: 512

    num_nodes: 1

    setup: |
      pip install -r requirements.txt

    run: |
      python train.py --batch_size 4
''')

K8S_JOB = dedent('''
    apiVersion: batch/v1
    kind: Job
    metadata:
      name: llama-sft
      labels:
        kueue.x-k8s.io/queue-name: research
    spec:
      template:
        spec:
          restartPolicy: Never
          nodeSelector:
            {label}: {product}
          containers:
            - name: trainer
              image: ghcr.io/acme/trainer:2024.06
              command: ["python", "train.py", "--batch_size", "4"]
              resources:
                limits:
                  nvidia.com/gpu: 1
                  memory: 200Gi
''')

MODAL_APP = dedent('''
    import modal

    image = modal.Image.debian_slim().pip_install("torch", "transformers", "datasets")
    app = modal.App("llama-sft", image=image)


    @app.function(gpu={gpu}, timeout=6 * 60 * 60)
    def train():
        from datasets import load_dataset
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B", torch_dtype="bfloat16")
        args = TrainingArguments(output_dir="/out", per_device_train_batch_size=4, max_steps=1000,
                                 gradient_checkpointing=True, bf16=True)
        Trainer(model=model, args=args, train_dataset=load_dataset("imdb", split="train")).train()
''')


def _lint(root: Path, name: str, **overrides):
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(cache=False, **overrides)
    return [d for d in Linter(settings).lint_path(root / name) if d.code.startswith("MEM")]


# ------------------------------------------------------------------ the readers


def test_slurm_gres_and_nodes():
    found = read("job.slurm", SLURM.format(gpu="a100", batch=1).replace("--nodes=1", "--nodes=2"))
    assert found.gpu.id == "a100-sxm4-80gb" and found.count == 16
    assert found.origin.range.start.line == 5 and found.said == "#SBATCH --gres=gpu:a100:8"


def test_slurm_untyped_gpus_with_a_constraint():
    text = "#!/bin/bash\n#SBATCH -N 1\n#SBATCH --gpus-per-node=4\n#SBATCH --constraint=h100\npython train.py\n"
    found = read("run.sbatch", text)
    assert found.gpu.id == "h100-sxm" and found.count == 4 and found.origin.range.start.line == 4


def test_slurm_without_a_gpu_type_names_no_gpu():
    assert read("job.sh", "#SBATCH --gres=gpu:8\n#SBATCH --partition=gpu\nsrun python train.py\n") is None
    assert read("job.sh", "# a plain script\ntorchrun --nproc_per_node 8 train.py\n") is None


def test_skypilot_accelerators_as_text_and_as_a_mapping():
    assert read("sky.yaml", SKYPILOT.format(accelerators="A100:8")).gpu.id == "a100-40gb"  # SkyPilot's A100
    found = read("sky.yaml", SKYPILOT.format(accelerators="{A100-80GB: 4}"))
    assert found.gpu.id == "a100-sxm4-80gb" and found.count == 4 and found.origin.range.start.line == 4


def test_skypilot_candidate_list_names_no_gpu():
    assert read("sky.yaml", SKYPILOT.format(accelerators="[A100:8, H100:8]")) is None
    # a YAML that merely has an `accelerators` key is no SkyPilot task
    assert read("model.yaml", "resources:\n  accelerators: A100:8\n") is None


def test_kubernetes_product_label_and_gke_accelerator():
    found = read("job.yaml", K8S_JOB.format(label="nvidia.com/gpu.product", product="NVIDIA-H100-80GB-HBM3"))
    assert found.gpu.id == "h100-sxm" and found.count == 1 and found.origin.range.start.line == 12
    gke = read("job.yaml", K8S_JOB.format(label="cloud.google.com/gke-accelerator", product="nvidia-tesla-a100"))
    assert gke.gpu.id == "a100-40gb"


def test_kubernetes_affinity_match_expressions():
    affinity = dedent('''
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
                - matchExpressions:
                    - key: nvidia.com/gpu.product
                      operator: In
                      values: [NVIDIA-L40S]
    ''')
    selector = "      nodeSelector:\n        team: research\n"
    text = K8S_JOB.format(label="team", product="research")
    assert selector in text
    text = text.replace(selector, "".join("      " + line + "\n" for line in affinity.splitlines()))
    assert read("job.yaml", text).gpu.id == "l40s"


def test_kubernetes_gpu_limit_without_a_product_names_no_gpu():
    assert read("job.yaml", K8S_JOB.format(label="team", product="research")) is None


def test_modal_string_and_deprecated_class():
    assert read("app.py", MODAL_APP.format(gpu='"H100:8"')).count == 8
    found = read("app.py", MODAL_APP.format(gpu='modal.gpu.A100(count=2, size="80GB")'))
    assert found.gpu.id == "a100-sxm4-80gb" and found.count == 2 and found.origin.range.start.line == 7
    assert read("app.py", MODAL_APP.format(gpu='"A100"')).gpu.id == "a100-40gb"  # Modal's A100


def test_modal_near_misses():
    assert read("app.py", MODAL_APP.format(gpu="None")) is None
    assert read("app.py", MODAL_APP.format(gpu="GPU_TYPE")) is None  # a variable: not read
    # not a Modal app: a gpu= keyword elsewhere is not a GPU request
    assert read("train.py", 'def launch(gpu="H100"):\n    pass\n') is None


# ------------------------------------------------------------------ end to end


def test_slurm_script_gives_the_gpu_of_the_run_it_launches(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="meta-llama/Llama-3.1-8B"),
                     "train.slurm": SLURM.format(gpu="a100", batch=16)})
    [finding] = _lint(tmp_path, "train.slurm")
    assert finding.code == "MEM001"
    assert "usable on NVIDIA A100-SXM4-80GB (requested by `#SBATCH --gres=gpu:a100:8` in train.slurm:5)" \
        in finding.message
    assert finding.data["gpu"]["line"] == 5 and finding.data["gpu"]["count"] == 8


def test_the_gpu_setting_wins_over_the_slurm_script(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="meta-llama/Llama-3.1-8B"),
                     "train.slurm": SLURM.format(gpu="a100", batch=16)})
    [finding] = _lint(tmp_path, "train.slurm", gpu="l40s")
    assert "L40S" in finding.message and "requested by" not in finding.message


def test_a_run_that_fits_the_requested_gpu_is_quiet(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="Qwen/Qwen2.5-0.5B"),
                     "train.slurm": SLURM.format(gpu="a100", batch=1)})
    assert _lint(tmp_path, "train.slurm") == []


def test_without_infrastructure_files_the_verdict_stays_silent(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="meta-llama/Llama-3.1-8B"),
                     "run.sh": "torchrun --nproc_per_node 8 train.py --batch_size 16\n"})
    assert _lint(tmp_path, "run.sh") == []


def test_skypilot_task_naming_the_script(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="Qwen/Qwen2.5-7B").replace("default=8", "default=4"),
                     "sky/sft.yaml": SKYPILOT.format(accelerators="L4:1")})
    [finding] = _lint(tmp_path, "train.py")
    assert finding.code == "MEM001" and "NVIDIA L4 (requested by `accelerators: L4:1` in sky/sft.yaml:4)" \
        in finding.message


def test_kubernetes_job_for_the_project(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="Qwen/Qwen2.5-7B"),
                     "deploy/job.yaml": K8S_JOB.format(label="nvidia.com/gpu.product", product="NVIDIA-L4")})
    [finding] = _lint(tmp_path, "train.py")
    assert "deploy/job.yaml:12" in finding.message


def test_two_infrastructure_files_that_disagree_name_no_gpu(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="Qwen/Qwen2.5-7B"),
                     "deploy/a.yaml": K8S_JOB.format(label="nvidia.com/gpu.product", product="NVIDIA-L4")
                     .replace("train.py", "other.py"),
                     "deploy/b.yaml": K8S_JOB.format(label="nvidia.com/gpu.product", product="NVIDIA-H100-80GB-HBM3")
                     .replace("train.py", "other.py")})
    assert _lint(tmp_path, "train.py") == []


def test_modal_app_is_judged_against_its_own_gpu(tmp_path: Path):
    write(tmp_path, {"app.py": MODAL_APP.format(gpu='"A10G"')})
    [finding] = _lint(tmp_path, "app.py")
    assert finding.code == "MEM001" and "A10G (requested by `gpu=\"A10G\"` in app.py:7)" in finding.message
    write(tmp_path, {"app.py": MODAL_APP.format(gpu='"H100"')})
    assert [f.code for f in _lint(tmp_path, "app.py")] in ([], ["MEM002"])


# ------------------------------------------------------------------ dstack, Ray, RunPod

DSTACK = dedent('''
    type: task
    name: llama-sft
    nodes: 1

    python: "3.11"
    env:
      - HF_TOKEN
    commands:
      - pip install -r requirements.txt
      - torchrun --nproc_per_node $DSTACK_GPUS_PER_NODE train.py --batch_size 16

    resources:
      gpu: {gpu}
      disk: 500GB..
''')

RAY_TRAIN = dedent('''
    import ray
    from ray.train import ScalingConfig
    from ray.train.torch import TorchTrainer

    from train import main

    trainer = TorchTrainer(
        main,
        scaling_config=ScalingConfig(
            num_workers=8,
            use_gpu=True,
            accelerator_type={accelerator},
        ),
    )
    result = trainer.fit()
''')

RUNPOD = dedent('''
    import os

    import runpod

    runpod.api_key = os.environ["RUNPOD_API_KEY"]
    pod = runpod.create_pod(
        name="llama-sft",
        image_name="runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04",
        gpu_type_id={gpu},
        gpu_count=2,
        volume_in_gb=200,
    )
''')


def test_dstack_gpu_specs():
    found = read("train.dstack.yml", DSTACK.format(gpu="A100:80GB:8").replace("nodes: 1", "nodes: 2"))
    assert found.gpu.id == "a100-sxm4-80gb" and found.count == 16 and found.origin.range.start.line == 13
    assert found.describe() == "`gpu: A100:80GB:8` in train.dstack.yml:13"
    assert read(".dstack.yml", DSTACK.format(gpu="A100:8")).gpu.id == "a100-40gb"  # either A100: the smaller
    memory_only = read(".dstack.yml", DSTACK.format(gpu="80GB:8"))  # any 80 GB card: the least usable one
    assert memory_only.gpu.label.startswith("80 GB") and memory_only.count == 8
    mapping = read(".dstack.yml", DSTACK.format(gpu="\n    name: [H100, L40S]\n    count: 2"))
    assert mapping.gpu.id == "l40s" and mapping.count == 2


def test_dstack_near_misses():
    # a fleet is no run; a GPU spec memlint cannot name (a vendor only) is no GPU
    assert read("fleet.dstack.yml", DSTACK.format(gpu="H100:8").replace("type: task", "type: fleet")) is None
    assert read(".dstack.yml", DSTACK.format(gpu="nvidia:2")) is None
    # an Axolotl-like YAML with a `gpu` key elsewhere is not a dstack configuration
    assert read("config.yaml", "base_model: Qwen/Qwen2.5-7B\nresources:\n  gpu: H100\n") is None


def test_ray_accelerator_types():
    found = read("ray_job.py", RAY_TRAIN.format(accelerator='"A100-80G"'))
    assert found.gpu.id == "a100-sxm4-80gb" and found.count == 8 and found.platform == "Ray"
    constant = RAY_TRAIN.format(accelerator="NVIDIA_TESLA_V100").replace(
        "import ray\n", "import ray\nfrom ray.util.accelerators import NVIDIA_TESLA_V100\n")
    assert read("ray_job.py", constant).gpu.id.startswith("v100")
    remote = dedent('''
        import ray
        from ray.util.accelerators import NVIDIA_A100


        @ray.remote(num_gpus=4, accelerator_type=NVIDIA_A100)
        def train_shard(config):
            ...
    ''')
    found = read("tasks.py", remote)
    assert found.gpu.id == "a100-40gb" and found.count == 4  # Ray's bare A100: either card


def test_ray_near_misses():
    # num_gpus without an accelerator type names no card; a variable is not read
    assert read("tasks.py", "import ray\n\n@ray.remote(num_gpus=1)\ndef f():\n    pass\n") is None
    assert read("ray_job.py", RAY_TRAIN.format(accelerator="args.accelerator")) is None
    # not a Ray program: accelerator_type is some other library's keyword
    assert read("job.py", 'from google.cloud import aiplatform\nm = dict(accelerator_type="NVIDIA_TESLA_A100")\n') is None


def test_runpod_pods():
    found = read("launch_pod.py", RUNPOD.format(gpu='"NVIDIA A100 80GB PCIe"'))
    assert found.gpu.id == "a100-pcie-80gb" and found.count == 2 and found.origin.range.start.line == 9
    shell = dedent('''
        #!/bin/bash
        set -euo pipefail
        runpodctl create pod --name llama-sft \\
          --gpuType "NVIDIA GeForce RTX 4090" --gpuCount 2 \\
          --imageName runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04
    ''')
    found = read("pod.sh", shell)
    assert found.gpu.id == "rtx-4090" and found.count == 2 and found.platform == "RunPod"
    assert read("launch_pod.py", RUNPOD.format(gpu="os.environ['GPU']")) is None  # not written in the file
    assert read("pod.sh", "runpodctl get pod\n") is None


def test_dstack_task_gives_the_gpu_of_its_run(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="meta-llama/Llama-3.1-8B"),
                     ".dstack.yml": DSTACK.format(gpu="L4:8")})
    [finding] = _lint(tmp_path, "train.py")
    assert finding.code == "MEM001" and "NVIDIA L4 (requested by `gpu: L4:8` in .dstack.yml:13)" in finding.message


def test_ray_job_gives_the_gpu_of_the_project(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="meta-llama/Llama-3.1-8B"),
                     "ray_job.py": RAY_TRAIN.format(accelerator='"L4"')})
    [finding] = _lint(tmp_path, "train.py")
    assert finding.code == "MEM001" and "requested by `accelerator_type=\"L4\"` in ray_job.py:12" in finding.message


# a Ray cluster launcher config as Ray's GCP GPU example writes it (python/ray/autoscaler/gcp/example-gpu-docker.yaml),
# with an A100 worker pool
RAY_CLUSTER_GCP = dedent('''
    cluster_name: llama-sft
    max_workers: 2
    provider:
        type: gcp
        region: us-central1
        availability_zone: us-central1-a
        project_id: my-project
    auth:
        ssh_user: ubuntu
    available_node_types:
        ray_head_default:
            min_workers: 0
            max_workers: 0
            resources: {"CPU": 8}
            node_config:
                machineType: n1-standard-8
        ray_worker_gpu:
            min_workers: 2
            max_workers: 2
            resources: {"CPU": 12, "GPU": 1}
            node_config:
                machineType: a2-highgpu-1g
                guestAccelerators:
                  - acceleratorType: projects/my-project/zones/us-central1-a/acceleratorTypes/nvidia-tesla-a100
                    acceleratorCount: 1
                scheduling:
                  - onHostMaintenance: TERMINATE
    head_node_type: ray_head_default
''')

# an AWS cluster whose GPU nodes carry the accelerator resource Ray schedules on
RAY_CLUSTER_AWS = dedent('''
    cluster_name: sft
    provider:
        type: aws
        region: us-west-2
    available_node_types:
        head:
            resources: {}
            node_config:
                InstanceType: m5.2xlarge
        gpu_workers:
            min_workers: 1
            max_workers: 4
            resources: {"GPU": 8, "accelerator_type:H100": 1}
            node_config:
                InstanceType: p5.48xlarge
    head_node_type: head
''')


def test_ray_cluster_configs():
    found = read("cluster.yaml", RAY_CLUSTER_GCP)
    assert found.gpu.id == "a100-40gb" and found.platform == "Ray"  # GCP's nvidia-tesla-a100: the 40 GB card
    assert found.count == 2 and found.said == "acceleratorType: projects/my-project/zones/us-central1-a/acceleratorTypes/nvidia-tesla-a100"
    assert found.origin.range.start.line == 24
    aws = read("cluster.yaml", RAY_CLUSTER_AWS)
    assert aws.gpu.id.startswith("h100") and aws.count == 8 and aws.said == "accelerator_type:H100 with GPU: 8"
    # Ray's NVIDIA_A10G is "A10G" (ray.util.accelerators), not a 10 GB card
    assert read("cluster.yaml", RAY_CLUSTER_AWS.replace("accelerator_type:H100", "accelerator_type:A10G")).gpu.id == "a10g"


def test_ray_cluster_near_misses():
    # GPUs without a card named: no verdict; two pools with different cards: no verdict
    assert read("cluster.yaml", RAY_CLUSTER_AWS.replace(', "accelerator_type:H100": 1', "")) is None
    mixed = RAY_CLUSTER_AWS.replace('    head:\n        resources: {}',
                                    '    head:\n        resources: {"GPU": 1, "accelerator_type:A10G": 1}')
    assert mixed != RAY_CLUSTER_AWS and read("cluster.yaml", mixed) is None
    # a Kubernetes manifest or a SkyPilot task is not a Ray cluster config
    assert read("values.yaml", "head:\n  resources: {GPU: 8, accelerator_type:A100: 1}\n") is None


def test_ray_cluster_gives_the_gpu_of_the_project(tmp_path: Path):
    write(tmp_path, {"train.py": TRAIN.format(model="meta-llama/Llama-3.1-8B"), "cluster.yaml": RAY_CLUSTER_GCP})
    [finding] = _lint(tmp_path, "train.py")
    assert finding.code == "MEM001" and "NVIDIA A100" in finding.message and "in cluster.yaml:24" in finding.message
