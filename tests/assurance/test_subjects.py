"""Subject keys, glob semantics and current code digests."""

from assurance.subjects import SubjectMatcher, code_digests, glob_regex, project_root, subject_key


def test_subject_keys():
    assert subject_key("deployment:sha256:ab") == "deployment"
    assert subject_key("model:sha256:ab") == "model"
    assert subject_key("code:kernels/a.py") == "code:kernels/a.py"


def test_glob_semantics():
    assert glob_regex("code:kernels/*.py").match("code:kernels/a.py")
    assert not glob_regex("code:kernels/*.py").match("code:kernels/x/a.py")
    assert glob_regex("code:engine/**/*.py").match("code:engine/x/y/a.py")
    assert glob_regex("code:engine/**/*.py").match("code:engine/a.py")
    assert not glob_regex("code:engine/*.py").match("code:engine/a.pyc")
    matcher = SubjectMatcher(["deployment", "code:kernels/?.py"])
    assert matcher.covers("deployment") and matcher.covers("code:kernels/a.py")
    assert not matcher.covers("model") and not matcher.covers("code:kernels/ab.py")


def test_code_digests_follow_file_content(tmp_path):
    (tmp_path / "kernels" / "__pycache__").mkdir(parents=True)
    (tmp_path / "kernels" / "matmul.py").write_text("v1")
    (tmp_path / "kernels" / "__pycache__" / "matmul.cpython-311.pyc").write_text("x")
    (tmp_path / "kernels" / "notes.txt").write_text("n")
    first = code_digests(["code:kernels/*.py", "deployment"], root=tmp_path)
    assert list(first) == ["code:kernels/matmul.py"]
    (tmp_path / "kernels" / "matmul.py").write_text("v2")
    assert code_digests(["code:kernels/*.py"], root=tmp_path) != first


def test_project_root_holds_the_packages():
    assert (project_root() / "assurance" / "status.py").is_file()
